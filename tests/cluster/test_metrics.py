"""What the dashboard shows of a run: stage-named tasks and actors, and raybatch metrics in Prometheus."""

from __future__ import annotations

import re
import time

import pytest
from cluster_support import SubmittedRun, scrape_metrics
from headnode import RayHead
from ray.util.state import list_actors, list_tasks

pytestmark = [pytest.mark.ray, pytest.mark.slow]

TASK_NAMES = re.compile(r"register .+|load job_\d+|prepare job_\d+ chunk_\d+")
ACTOR_NAMES = re.compile(
    r"BatchCoordinator-[0-9a-f]{16}-[0-9a-f]{12}|ResultWriter-\d+-[0-9a-f]{8}"
)  # db id, settings and code
CHUNK_PAGES = 8


def test_tasks_and_actors_carry_stage_names(job_head: RayHead, submitted_run: SubmittedRun) -> None:
    job_id = submitted_run.submission.ray_job_id
    assert job_id
    tasks = list_tasks(
        address=job_head.dashboard_url, filters=[("job_id", "=", job_id), ("type", "=", "NORMAL_TASK")]
    )
    names = [t.name for t in tasks]
    assert names and all(TASK_NAMES.fullmatch(n) for n in names), names
    chunks = -(-submitted_run.corpus.pages // CHUNK_PAGES)
    assert sum(n.startswith("prepare ") for n in names) == chunks  # one task per chunk, not per page
    actors = list_actors(address=job_head.dashboard_url, filters=[("job_id", "=", job_id)])
    by_class = {a.class_name: a.name for a in actors}
    assert set(by_class) == {"CoordinatorActor", "WriterActor"}, by_class
    assert all(ACTOR_NAMES.fullmatch(a.name) for a in actors), [a.name for a in actors]


def test_prometheus_endpoint_reports_the_run(job_head: RayHead, submitted_run: SubmittedRun) -> None:
    corpus = submitted_run.corpus
    expected = {
        "ray_raybatch_pages_prepared_total": corpus.pages,
        "ray_raybatch_requests_submitted_total": -(-corpus.pages // CHUNK_PAGES),
        "ray_raybatch_documents_written_total": corpus.documents,
    }
    figures = _scrape_until(job_head, expected, timeout=30)
    for name, value in expected.items():
        assert figures.get(name) == value, (name, figures)
    assert figures["ray_raybatch_batches_created_total"] >= 1
    assert figures["ray_raybatch_batches_ended_total"] == figures["ray_raybatch_batches_created_total"]
    assert figures["ray_raybatch_tokens_total"] > 0
    assert 0 < figures["ray_raybatch_cost_usd_total"] < 1
    assert figures["ray_raybatch_jobs_finished_total"] == 1
    # gauges, as sampled while the run went on
    peaks = submitted_run.metric_peaks
    assert peaks["ray_raybatch_batches_in_flight"] >= 1
    assert peaks["ray_raybatch_writer_mb_in_flight"] >= 0
    assert peaks["ray_raybatch_workload_capacity"] == 12
    assert peaks["ray_raybatch_workload_units"] >= 5  # the run's own lease, by holder
    assert peaks["ray_raybatch_workload_concurrency"] >= 1  # registration and prepare caps chosen


def _scrape_until(head: RayHead, expected: dict[str, float], timeout: float) -> dict[str, float]:
    """Metrics are reported every second or so: read until the expected counters arrive."""
    deadline = time.monotonic() + timeout
    figures = scrape_metrics(head)
    while any(figures.get(k) != v for k, v in expected.items()) and time.monotonic() < deadline:
        time.sleep(1)
        figures = scrape_metrics(head)
    return figures
