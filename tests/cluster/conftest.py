"""Fixtures for the cluster tests: a small digital sample corpus, a Ray head of their own, one submitted run.

The head (``job_head``) is shared by the job-submission and metrics tests and stopped as soon as the
next test does not use it, so it never runs beside the other tests' Ray.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_support import (
    METRICS_REPORT_MS,
    Corpus,
    MetricsSampler,
    SubmittedRun,
    job_args,
    submit,
    write_digital_corpus,
)
from headnode import RayHead


@pytest.fixture(scope="session")
def digital_corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """A 17-page digital bundle of three documents, with truth.json."""
    return write_digital_corpus(tmp_path_factory.mktemp("digital") / "samples")


# --- a head for `ray job submit` ------------------------------------------------------------
_HEADS: list[RayHead] = []


@pytest.fixture(scope="session")
def job_head() -> Iterator[RayHead]:
    """A head with the dashboard on loopback, the writers' resource, and a Prometheus endpoint,
    found by a process given RAY_TMPDIR=head.root as a node's processes find theirs."""
    head = RayHead(
        num_cpus=2,
        resources={"result_mb": 1024},
        system_config={"metrics_report_interval_ms": METRICS_REPORT_MS},
        default_layout=True,
    )
    _HEADS.append(head)
    with head:
        yield head


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the shared head once the next test does not need it."""
    if nextitem is None or "job_head" not in getattr(nextitem, "fixturenames", ()):
        while _HEADS:
            _HEADS.pop().stop()


@pytest.fixture(scope="session")
def submitted_run(
    job_head: RayHead, digital_corpus: Corpus, tmp_path_factory: pytest.TempPathFactory
) -> SubmittedRun:
    """The digital corpus run once through `ray job submit` on ``job_head``, its metrics sampled."""
    home = tmp_path_factory.mktemp("submitted")
    with MetricsSampler(job_head) as sampler:
        submission = submit(job_head, "raybatch-digital", [*job_args(digital_corpus, home), "--every", "1"])
    return SubmittedRun(submission, digital_corpus, home, sampler.peaks)
