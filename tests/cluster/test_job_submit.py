"""`ray job submit -- raybatch run ...` on a head of the test's own: success, resume, failure; and a
driver started on the head's machine without RAY_ADDRESS joins it, its workers' output in its logs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pymupdf
import pytest
from cluster_support import Corpus, SubmittedRun, job_args, submit
from headnode import REPO, RayHead, ray_env

from raybatch.ids import OutputKeys
from raybatch.models import JobStatus
from raybatch.objects import LocalObjectStore
from raybatch.report import evaluate_run
from raybatch.settings import StateSettings
from raybatch.state import SqlStateStore, open_state

pytestmark = [pytest.mark.ray, pytest.mark.slow]

PROGRESS = re.compile(
    r"^progress: jobs (\d+)/(\d+) done \(.*\), pages (\d+)/(\d+), batches \d+, writers \d+ MB, "
    r"documents (\d+), \d+ s$",
    re.M,
)


def _state(home: Path) -> SqlStateStore:
    return open_state(StateSettings(database_url=f"sqlite:///{home / 'state.db'}"))


def _result(logs: str) -> dict:
    """The JSON object `raybatch run --json` prints (the failures' table may follow it)."""
    return next(json.loads(line) for line in reversed(logs.splitlines()) if line.startswith("{"))


def test_the_job_succeeds_and_writes_every_document(submitted_run: SubmittedRun) -> None:
    sub, corpus = submitted_run.submission, submitted_run.corpus
    assert (sub.status, sub.driver_exit_code, sub.returncode) == ("SUCCEEDED", 0, 0), sub.logs[-3000:]
    state = _state(submitted_run.home)
    assert [j.status for j in state.list_jobs()] == [JobStatus.COMPLETED]
    rows = state.list_documents()
    assert len(rows) == corpus.documents
    store = LocalObjectStore(submitted_run.home / "store")
    listed = {k for k in store.list(OutputKeys(state.database_id()).jobs) if "/documents/" in k}
    assert listed == {k for d in rows for k in (d.pdf_key, d.thumb_key, d.text_key)}  # objects and rows agree
    for doc in rows:
        with pymupdf.open("pdf", store.get(doc.pdf_key)) as pdf:
            assert pdf.page_count == doc.last_page - doc.first_page + 1
    figures = evaluate_run(state, corpus.truth)
    assert (figures["boundary_f1"], figures["type_accuracy"]) == (1.0, 1.0)


def test_the_job_logs_progress_lines_and_a_summary(submitted_run: SubmittedRun) -> None:
    logs, corpus = submitted_run.submission.logs, submitted_run.corpus
    assert "emulator: using the built-in Claude emulator" in logs
    lines = PROGRESS.findall(logs)  # plain lines, not bars: the job's output is no terminal
    assert len(lines) >= 2, logs[-3000:]
    last = tuple(map(int, lines[-1]))  # jobs done, jobs, pages, pages in all, documents
    assert last == (1, 1, corpus.pages, corpus.pages, corpus.documents)
    result = _result(logs)
    assert result["failed"] == [] and result["by_status"]["completed"] == 1
    assert (result["pages"], result["documents"]) == (corpus.pages, corpus.documents)
    assert result["input_tokens"] > 0


def test_submitting_again_resumes_without_duplicates(job_head: RayHead, submitted_run: SubmittedRun) -> None:
    store = LocalObjectStore(submitted_run.home / "store")
    before = {k: store.head(k) for k in store.list("")}
    state = _state(submitted_run.home)
    batches_before = state.known_batch_ids()

    again = submit(job_head, "raybatch-digital-again", job_args(submitted_run.corpus, submitted_run.home))

    assert (again.status, again.driver_exit_code) == ("SUCCEEDED", 0), again.logs[-3000:]
    assert "1 jobs registered from 1 files" in again.logs
    assert _result(again.logs)["documents"] == submitted_run.corpus.documents
    assert len(state.list_jobs()) == 1  # the same file is the same job
    assert len(state.list_documents()) == submitted_run.corpus.documents
    assert state.known_batch_ids() == batches_before  # nothing sent to Claude again
    assert {k: store.head(k) for k in store.list("")} == before


def test_a_failed_job_fails_the_submission(job_head: RayHead, tmp_path: Path) -> None:
    corpus = tmp_path / "broken"
    corpus.mkdir()
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\n%%garbage, no xref\n")

    failed = submit(job_head, "raybatch-broken", job_args(Corpus(corpus, {}), tmp_path))

    assert (failed.status, failed.driver_exit_code) == ("FAILED", 1), failed.logs[-3000:]
    assert failed.returncode != 0
    [(_, name, reason)] = _result(failed.logs)["failed"]
    assert name == "broken.pdf" and reason.startswith("InvalidSource: corrupt"), failed.logs[-3000:]
    assert "failed jobs" in failed.logs  # the failures' table
    assert [j.status for j in _state(tmp_path).list_jobs()] == [JobStatus.FAILED]


def test_the_upload_leaves_the_virtualenv_behind(job_head: RayHead, submitted_run: SubmittedRun) -> None:
    uploads = job_head.temp_dir / "session_latest/runtime_resources/working_dir_files"
    unpacked = [p for p in uploads.glob("_ray_pkg_*") if p.is_dir()]
    assert unpacked, "the job's working dir was not unpacked on the head"
    for root in unpacked:
        files = [p for p in root.rglob("*") if p.is_file()]
        assert (root / "jobs/process.py").is_file()
        assert not any(part in {".venv", ".git", "raybatch-data"} for p in files for part in p.parts)
        assert sum(p.stat().st_size for p in files) < 20 * 2**20


JOINS = """
import logging, ray
from raybatch.settings import load_settings
from raybatch.shells.runtime import connect

started = connect(load_settings())
ray.get(ray.remote(num_cpus=0)(lambda: logging.getLogger("w").warning("worker says hello")).remote())
print("started" if started else "joined", ray.get_runtime_context().gcs_address, flush=True)
ray.shutdown()  # flushes what the workers printed
"""


def test_a_driver_on_a_node_joins_its_cluster_and_hears_its_workers(job_head: RayHead) -> None:
    env = ray_env({"RAY_TMPDIR": str(job_head.root)})  # as on the head node itself; no RAY_ADDRESS
    done = subprocess.run(
        [sys.executable, "-c", JOINS], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    joined, address = done.stdout.split()[-2:]
    assert joined == "joined" and address.endswith(f":{job_head.gcs_port}"), done.stdout
    assert "worker says hello" in done.stdout + done.stderr  # log_to_driver: worker output reaches the job
    assert "declares result_mb" not in done.stderr  # this head has the writers' resource: no warning
