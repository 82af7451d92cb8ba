"""Crashes, stops, pauses and modes on local Ray: every document written exactly once, no extra batch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import anthropic
import pyarrow.parquet as pq
import pymupdf
import pytest
import ray
from pipeline_support import CorpusRun, chunk_answers, corpus_subset, run_settings, warm_settings
from waiting import wait_for

from raybatch.claude.emulator import EmulatorServer
from raybatch.ids import OutputKeys
from raybatch.models import BatchStatus, JobStatus
from raybatch.objects import LocalObjectStore
from raybatch.pipeline import RunReport, run
from raybatch.report import evaluate_run
from raybatch.settings import Settings, StateSettings
from raybatch.shells.runtime import coordinator_name
from raybatch.state import SqlStateStore, open_state, open_workload

pytestmark = [pytest.mark.ray, pytest.mark.slow]

FILES = ["bundle_000.pdf", "bundle_002.pdf"]


class Background:
    """``run`` in a thread, so the test can act on the system while it works."""

    def __init__(self, settings: Settings, source: str) -> None:
        self.settings = settings
        self.report: RunReport | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(settings, source), daemon=True)
        self._thread.start()

    def _run(self, settings: Settings, source: str) -> None:
        try:
            self.report = run(settings, source)
        except BaseException as exc:
            self.error = exc

    def join(self, timeout: float = 600.0) -> RunReport:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the run did not end: {describe(state_of(self.settings))}"
        if self.error is not None:
            raise self.error
        assert self.report is not None
        return self.report


def state_of(settings: Settings) -> SqlStateStore:
    return open_state(settings.section(StateSettings))


def describe(state: SqlStateStore) -> str:
    """Where every job, chunk and batch stands: the message of a run that did not end."""
    lines = [
        f"job {j.id} {j.status.value} {j.error_message or ''} chunks "
        + str([(c.n, c.status.value, c.batch_id, c.attempts) for c in state.get_chunks(j.id)])
        for j in state.list_jobs()
    ]
    lines.append(f"active batches {[(b.id, b.anthropic_id, b.status.value) for b in state.active_batches()]}")
    return "\n".join(lines)


def batch_in_flight(state: SqlStateStore) -> bool:
    return any(b.anthropic_id and b.status is BatchStatus.IN_PROGRESS for b in state.active_batches())


def run_with_a_batch_in_flight(
    corpus_run: CorpusRun, emulator: EmulatorServer, folder: Path
) -> tuple[dict, Settings, Background]:
    """The truth, settings and background run of ``FILES``, once a batch (of 4 s) is in flight."""
    emulator.config.processing_seconds = 4.0
    truth = corpus_subset(corpus_run, FILES, folder / "in")
    settings = warm_settings(corpus_run, folder / "home", emulator)
    background = Background(settings, str(folder / "in"))
    wait_for(lambda: batch_in_flight(state_of(settings)), what="a batch in flight")
    return truth, settings, background


def assert_written_once(settings: Settings, truth: dict, emulator: EmulatorServer) -> None:
    """Objects and rows agree, the split is exact, and the API saw no batch we did not record."""
    state = state_of(settings)
    assert {j.status for j in state.list_jobs()} == {JobStatus.COMPLETED}
    rows = state.list_documents()
    store = LocalObjectStore(settings.store)
    keys = OutputKeys(state.database_id())
    listed = {k for k in store.list(keys.jobs) if "/documents/" in k}
    assert listed == {k for d in rows for k in (d.pdf_key, d.thumb_key, d.text_key)}
    assert len({(d.job_id, d.index) for d in rows}) == len(rows)
    table = pq.read_table(Path(settings.store) / keys.documents_table)  # compacted: each row once
    assert sorted(zip(table["job_id"].to_pylist(), table["index"].to_pylist(), strict=True)) == sorted(
        (d.job_id, d.index) for d in rows
    )
    assert evaluate_run(state, truth)["boundary_f1"] == 1.0
    assert emulator.app.calls["create"] == len(state.known_batch_ids())
    chunks = [c for j in state.list_jobs() for c in state.get_chunks(j.id)]
    assert requests_sent(emulator) == len(chunks)  # no chunk went to Claude twice


def requests_sent(emulator: EmulatorServer) -> int:
    """Requests in every batch the emulator holds, counted through the SDK."""
    client = anthropic.Anthropic(api_key="test-key", base_url=emulator.base_url)
    with client:
        return sum(
            sum(b.request_counts.model_dump().values()) for b in client.messages.batches.list(limit=100)
        )


def test_killing_the_coordinator_mid_run(
    corpus_run: CorpusRun, emulator: EmulatorServer, tmp_path: Path
) -> None:
    truth, settings, background = run_with_a_batch_in_flight(corpus_run, emulator, tmp_path)
    ray.kill(ray.get_actor(coordinator_name(settings), namespace=settings.ray_namespace))
    report = background.join()
    assert report.ok
    assert_written_once(settings, truth, emulator)


def _some_job(*statuses: JobStatus) -> Callable[[SqlStateStore], bool]:
    return lambda state: bool(state.list_jobs(list(statuses)))


# Where the driver's process is killed: while preparing, while a batch runs, while writing.
KILL_POINTS = {
    "preparing": _some_job(JobStatus.PREPARING),
    "batch in flight": batch_in_flight,
    "writing": _some_job(JobStatus.ANSWERED, JobStatus.WRITING),
}


def cli_run(settings: Settings, folder: Path, emulator: EmulatorServer) -> tuple[list[str], dict[str, str]]:
    """The ``raybatch run`` command of ``folder`` on the session's Ray, and its environment."""
    env = {
        **os.environ,
        "RAY_ADDRESS": ray.get_runtime_context().gcs_address,
        "ANTHROPIC_BASE_URL": emulator.base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "RAYBATCH_LEASE_SECONDS": str(settings.lease_seconds),
        "RAYBATCH_POLL_INTERVAL": "0.5",
        "RAYBATCH_DRAIN_SECONDS": str(settings.drain_seconds),
        "RAYBATCH_BATCH_SIZE": str(settings.batch_size),
    }
    command = [sys.executable, "-m", "raybatch.cli", "run", str(folder), "--quiet"]
    command += ["--db", settings.database_url.get_secret_value(), "--store", settings.store]
    return command, env


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_killing_the_driver_and_running_again(
    corpus_run: CorpusRun, emulator: EmulatorServer, tmp_path: Path, point: str
) -> None:
    emulator.config.processing_seconds = 4.0
    truth = corpus_subset(corpus_run, FILES, tmp_path / "in")
    settings = warm_settings(corpus_run, tmp_path / "home", emulator)
    command, env = cli_run(settings, tmp_path / "in", emulator)
    driver = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: KILL_POINTS[point](state_of(settings)), what=point)
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    report = Background(settings, str(tmp_path / "in")).join()
    assert report.ok
    assert_written_once(settings, truth, emulator)


DRAIN_SECONDS = 8.0
STOP_MARGIN = 30.0  # the drain's bound, then handing back and leaving Ray, on busy cores


def one_page_pdfs(folder: Path, count: int) -> Path:
    """``count`` one-page PDFs with a text layer (nothing to OCR) in ``folder``."""
    folder.mkdir(parents=True)
    for n in range(count):
        with pymupdf.open() as doc:
            doc.new_page().insert_text((72, 72), f"INVOICE {n:04d}\nTotal due: {10 * n + 10} EUR")
            doc.save(folder / f"invoice_{n}.pdf")
    return folder


def writes_to_come(state: SqlStateStore) -> bool:
    """Answers are filed, and some of their jobs are still to be written or being written."""
    statuses = {j.status for j in state.list_jobs()}
    answered = {JobStatus.ANSWERED, JobStatus.WRITING, JobStatus.COMPLETED}
    return bool(statuses & answered) and statuses != {JobStatus.COMPLETED}


def test_sigterm_drains_a_real_run_and_the_next_run_finishes_it(
    ray_session: None, emulator: EmulatorServer, tmp_path: Path
) -> None:
    """A real SIGTERM to ``raybatch run`` while answers are written: it exits 130 within
    DRAIN_SECONDS and a margin, saying so; no lease is left to run out; every job is done, claimable
    or in a batch the coordinator files; the same command again completes them all, and no chunk
    was answered twice."""
    emulator.config.processing_seconds = 2.0
    folder = one_page_pdfs(tmp_path / "in", 6)
    settings = run_settings(tmp_path / "home", emulator, drain_seconds=DRAIN_SECONDS, batch_size=2)
    command, env = cli_run(settings, folder, emulator)
    out = (tmp_path / "first.log").open("w+")
    driver = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, text=True)
    state = state_of(settings)
    try:
        wait_for(lambda: writes_to_come(state), what="answers filed, writes to come", interval=0.05)
    finally:
        driver.send_signal(signal.SIGTERM)
        asked = time.monotonic()
        try:
            driver.wait(timeout=DRAIN_SECONDS + STOP_MARGIN)
        except subprocess.TimeoutExpired:
            driver.kill()
            driver.wait()
    took = time.monotonic() - asked
    said = (tmp_path / "first.log").read_text()
    assert driver.returncode == 130, said
    assert took < DRAIN_SECONDS + STOP_MARGIN, f"the drain took {took:.0f} s"
    assert "SIGTERM: the run drains and stops" in said and "stopped:" in said, said
    assert "interrupted; run the same command again to resume" in said, said

    now = datetime.now(UTC)
    jobs = state.list_jobs()
    held = [j.id for j in jobs if j.held_until is not None and j.held_until > now]
    assert not held, f"leases left to run out: {describe(state)}"
    claimable = {JobStatus.COMPLETED, JobStatus.PENDING, JobStatus.PREPARED, JobStatus.ANSWERED}
    in_flight = {b.anthropic_id for b in state.active_batches()}
    for job in jobs:  # done, claimable by the next driver, or in a batch the coordinator files
        chunks = {c.batch_id for c in state.get_chunks(job.id)}
        assert job.status in claimable or chunks <= in_flight, describe(state)
    assert not open_workload(settings.section(StateSettings)).live_leases(), "the run's units are held"

    again = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert {j.status for j in state.list_jobs()} == {JobStatus.COMPLETED}, describe(state)
    assert len(state.list_jobs()) == 6
    twice = {cid: n for cid, n in chunk_answers(emulator.app.answers()).items() if n > 1}
    assert not twice, f"chunks answered twice: {twice}"


def test_pause_holds_submissions_and_polls_until_resumed(
    corpus_run: CorpusRun, emulator: EmulatorServer, tmp_path: Path
) -> None:
    truth = corpus_subset(corpus_run, FILES, tmp_path / "in")
    settings = warm_settings(corpus_run, tmp_path / "home", emulator)
    state = state_of(settings)
    state.set_paused(True)
    background = Background(settings, str(tmp_path / "in"))
    wait_for(lambda: {j.status for j in state.list_jobs()} == {JobStatus.PREPARED}, what="prepared jobs")
    time.sleep(2.0)  # several coordinator passes
    assert emulator.app.calls.get("create", 0) == 0
    assert {j.status for j in state.list_jobs()} == {JobStatus.PREPARED}
    state.set_paused(False)
    assert background.join().ok
    assert_written_once(settings, truth, emulator)


def test_batch_and_sync_modes_write_identical_documents(
    corpus_run: CorpusRun, emulator: EmulatorServer, tmp_path: Path
) -> None:
    corpus_subset(corpus_run, FILES, tmp_path / "in")
    outputs = {}
    for mode in ("batch", "sync"):
        settings = warm_settings(corpus_run, tmp_path / mode, emulator, processing_mode=mode)
        assert run(settings, str(tmp_path / "in")).ok
        state, store = state_of(settings), LocalObjectStore(settings.store)
        names = {j.id: j.source_name for j in state.list_jobs()}
        docs = state.list_documents()
        rows = sorted(
            (names[d.job_id], d.index, d.first_page, d.last_page, d.doc_type, d.number, d.group_key)
            for d in docs
        )
        pdfs = {(names[d.job_id], d.index): store.get(d.pdf_key) for d in docs}
        outputs[mode] = (rows, pdfs, {j.mode for j in state.list_jobs()})
    assert outputs["batch"][0] == outputs["sync"][0]
    assert outputs["batch"][1] == outputs["sync"][1]  # byte for byte
    assert (outputs["batch"][2], outputs["sync"][2]) == ({"batch"}, {"sync"})
    assert emulator.app.calls["messages"] >= 1


def test_bad_files_fail_alone_with_reasons(
    corpus_run: CorpusRun, emulator: EmulatorServer, tmp_path: Path
) -> None:
    folder = tmp_path / "in"
    corpus_subset(corpus_run, ["bundle_001.pdf"], folder)
    good = (folder / "bundle_001.pdf").read_bytes()
    (folder / "truncated.pdf").write_bytes(good[: len(good) // 3])
    (folder / "zero.pdf").write_bytes(
        b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
        b"2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
    )
    with pymupdf.open() as doc:
        doc.new_page().insert_text((72, 72), "secret")
        doc.save(folder / "encrypted.pdf", encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o")
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    settings = warm_settings(corpus_run, tmp_path / "home", emulator)
    report = run(settings, str(folder))
    by_name = {j.source_name: j for j in report.jobs}
    assert by_name["bundle_001.pdf"].status is JobStatus.COMPLETED
    reasons = {
        name: (j.status, j.error_message or "") for name, j in by_name.items() if name != "bundle_001.pdf"
    }
    assert {status for status, _ in reasons.values()} == {JobStatus.FAILED}
    assert reasons["encrypted.pdf"][1].startswith("encrypted")
    assert reasons["zero.pdf"][1].startswith(("empty", "corrupt"))
    assert reasons["truncated.pdf"][1].startswith(("corrupt", "empty"))
    assert reasons["photo.png"][1]
    assert not report.ok
