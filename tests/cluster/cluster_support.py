"""What the cluster tests share: a small digital sample corpus, `ray job submit`, metric scraping.

(A module of its own rather than conftest.py: every test folder has a 'conftest' module.)
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headnode import REPO, VENV_BIN, RayHead, ray_env
from prometheus_client.parser import text_string_to_metric_families

from raybatch.ids import sha256_bytes
from raybatch.samples.plan import plan_corpus
from raybatch.samples.render import render_bundle
from raybatch.samples.write import bundle_truth, groups_truth

# Knobs of the submitted jobs: no OCR (the corpus is digital) and a short poll, so a run takes seconds.
JOB_ENV = {"OCR_ENGINE": "none", "POLL_INTERVAL": "1"}
CORPUS_DOCUMENTS = 3  # the first three documents of bundle_000: 17 pages, one crossing two chunk borders
METRICS_REPORT_MS = 1000  # Ray's default is 10 s; the metrics test reads the endpoint right after a run


@dataclass(frozen=True)
class Corpus:
    """A sample corpus on disk and its truth."""

    folder: Path
    truth: dict[str, Any]

    @property
    def pages(self) -> int:
        return sum(b["pages"] for b in self.truth["bundles"])

    @property
    def documents(self) -> int:
        return sum(len(b["documents"]) for b in self.truth["bundles"])


def write_digital_corpus(folder: Path, *, documents: int = CORPUS_DOCUMENTS, seed: int = 7) -> Corpus:
    """The sample corpus's first bundle cut to its first ``documents`` documents, every page digital.

    Digital pages keep their text layer, so the split is exact without OCR, which would dominate the
    run time on two cores.
    """
    folder.mkdir(parents=True, exist_ok=True)
    plan = plan_corpus(1, seed)
    entries = []
    for bundle in plan.bundles:
        del bundle.documents[documents:]
        for page in bundle.pages:
            page.scanned = False
        data = render_bundle(bundle, seed)
        (folder / bundle.file).write_bytes(data)
        entries.append(bundle_truth(bundle, sha256_bytes(data)))
    truth = {"seed": seed, "bundles": entries, "groups": groups_truth(plan)}
    (folder / "truth.json").write_text(json.dumps(truth, ensure_ascii=False), encoding="utf-8")
    return Corpus(folder, truth)


@dataclass(frozen=True)
class Submission:
    """One `ray job submit` and what came of it."""

    submission_id: str
    returncode: int  # of the `ray job submit` command
    status: str
    driver_exit_code: int | None
    ray_job_id: str | None
    logs: str


def submit(head: RayHead, submission_id: str, args: Sequence[str], timeout: float = 240) -> Submission:
    """`ray job submit --working-dir <repo> -- raybatch run ARGS`, waiting for the end."""
    from ray.job_submission import JobSubmissionClient

    command = [
        str(VENV_BIN / "ray"), "job", "submit",
        "--address", head.dashboard_url,
        "--submission-id", submission_id,
        "--working-dir", str(REPO),
        "--runtime-env-json", json.dumps({"env_vars": JOB_ENV}),
        "--", "raybatch", "run", *args,
    ]  # fmt: skip
    done = subprocess.run(command, env=ray_env(), capture_output=True, text=True, timeout=timeout)
    client = JobSubmissionClient(head.dashboard_url)
    info = client.get_job_info(submission_id)
    deadline = time.monotonic() + 30
    while not info.status.is_terminal() and time.monotonic() < deadline:  # the CLI may end first
        time.sleep(0.5)
        info = client.get_job_info(submission_id)
    return Submission(
        submission_id,
        done.returncode,
        info.status.value,
        info.driver_exit_code,
        info.job_id,
        client.get_job_logs(submission_id),
    )


def job_args(corpus: Corpus, home: Path) -> list[str]:
    """`raybatch run`'s arguments for ``corpus`` into a store and a SQLite database under ``home``."""
    db = f"sqlite:///{home / 'state.db'}"
    return [str(corpus.folder), "--store", str(home / "store"), "--db", db, "--emulator", "--json"]


def scrape_metrics(head: RayHead) -> dict[str, float]:
    """Every raybatch sample on the head's Prometheus endpoint, summed over labels (workers, kinds)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{head.metrics_port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    sums: dict[str, float] = defaultdict(float)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("ray_raybatch_"):
                sums[sample.name] += sample.value
    return dict(sums)


@dataclass
class MetricsSampler:
    """Scrapes the head while a run goes on and keeps each metric's peak: a gauge's series leaves the
    endpoint soon after its process ends, so gauges are read during the run."""

    head: RayHead
    every: float = 0.5
    peaks: dict[str, float] = field(default_factory=dict)

    def __enter__(self) -> MetricsSampler:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(self.every):
            try:
                figures = scrape_metrics(self.head)
            except OSError:
                continue
            for name, value in figures.items():
                self.peaks[name] = max(value, self.peaks.get(name, value))


@dataclass(frozen=True)
class SubmittedRun:
    """The digital corpus processed through `ray job submit` into its own folder."""

    submission: Submission
    corpus: Corpus
    home: Path
    metric_peaks: dict[str, float]
