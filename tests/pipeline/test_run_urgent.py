"""Urgent work while a backlog runs: one bundle handed over with ``submit(urgent=True)`` beside a
batch-mode backlog on the same Ray and database is written before every backlog job still pending
when it arrived, sent with synchronous calls only; the backlog completes and nothing is sent twice.
``run --urgent`` makes every file of its source urgent whatever PROCESSING_MODE says."""

from __future__ import annotations

import threading
from pathlib import Path

import pymupdf
import pytest
from pipeline_support import chunk_answers, run_settings
from waiting import wait_for

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.cli import main
from raybatch.models import JobStatus, Priority
from raybatch.pipeline import RunReport, run, submit
from raybatch.settings import StateSettings
from raybatch.state import SqlStateStore, open_state

pytestmark = [pytest.mark.ray, pytest.mark.slow]

BACKLOG = 30  # one-page PDFs


def one_page_pdfs(folder: Path, stem: str, count: int) -> Path:
    folder.mkdir(parents=True)
    for n in range(count):
        doc = pymupdf.open()
        text = f"INVOICE No {stem}-{n}\nSeller: Acme Ltd\nTotal: {100 + n}.00 USD"
        doc.new_page().insert_text((72, 72), text)
        doc.save(folder / f"{stem}_{n}.pdf")
        doc.close()
    return folder


def bundle(path: Path) -> Path:
    """One three-page bundle: an invoice and a two-page letter."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = pymupdf.open()
    texts = ("INVOICE No U-1\nSeller: Urgent Ltd\nTotal: 5.00 USD", "LETTER\nDear Sir", "Yours faithfully")
    for text in texts:
        doc.new_page().insert_text((72, 72), text)
    doc.save(path)
    doc.close()
    return path


def backlog_is_running(state: SqlStateStore) -> bool:
    """Every backlog file registered, some prepared already, several still pending."""
    counts = state.count_jobs()
    started = sum(counts.values()) - counts[JobStatus.PENDING] - counts[JobStatus.PREPARING]
    return sum(counts.values()) >= BACKLOG and started >= 1 and counts[JobStatus.PENDING] >= 3


def test_an_urgent_bundle_jumps_a_running_backlog(
    ray_session: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAYBATCH_EMULATOR", "1")
    # Most of the backlog stays pending a while: claimed 4 jobs at a time (a window of CLAIM_WINDOW, or
    # GROUP_CHUNKS x the prepare cap of 2).
    monkeypatch.setattr("raybatch.pipeline.CLAIM_WINDOW", 4)
    monkeypatch.setattr("raybatch.pipeline.GROUP_CHUNKS", 2)
    with EmulatorServer(EmulatorConfig(processing_seconds=4.0)) as emulator:
        settings = run_settings(
            tmp_path / "home", emulator, ocr_engine="none", prepare_in_flight=2, result_workers=2
        )
        source = one_page_pdfs(tmp_path / "backlog", "n", BACKLOG)
        state = open_state(settings.section(StateSettings))
        reports: dict[str, RunReport] = {}
        backlog = threading.Thread(target=lambda: reports.update(backlog=run(settings, str(source))))
        backlog.start()
        try:
            wait_for(lambda: backlog_is_running(state), what="the backlog running", interval=0.05)
            pending_then = {j.id for j in state.list_jobs([JobStatus.PENDING])}
            urgent_file = bundle(tmp_path / "urgent" / "bundle.pdf")
            reports["urgent"] = submit(settings, [str(urgent_file)], urgent=True)
        finally:
            backlog.join(timeout=300)
        answers = chunk_answers(emulator.app.answers())
        batched = set(
            chunk_answers({r.custom_id: 1 for b in emulator.app.store.newest_first() for r in b.requests})
        )

    assert set(reports) == {"backlog", "urgent"} and reports["urgent"].ok and reports["backlog"].ok
    [urgent] = reports["urgent"].jobs
    assert urgent.priority is Priority.URGENT and urgent.status is JobStatus.COMPLETED
    jobs = state.list_jobs()
    assert len(jobs) == BACKLOG + 1 and {j.status for j in jobs} == {JobStatus.COMPLETED}
    # Written before every backlog job that was still pending when it arrived.
    done_at = {j.id: j.updated_at for j in jobs}
    assert pending_then and all(done_at[urgent.id] < done_at[j] for j in pending_then)
    assert state.list_documents(urgent.id)
    # Sent with synchronous calls only; the backlog in batches.
    urgent_chunks = state.get_chunks(urgent.id)
    assert {c.sent_mode for c in urgent_chunks} == {"sync"}
    assert not batched & {c.custom_id for c in urgent_chunks}
    backlog_chunks = [c for j in jobs if j.id != urgent.id for c in state.get_chunks(j.id)]
    assert {c.sent_mode for c in backlog_chunks} == {"batch"}
    # Nothing sent twice: one paid answer per request.
    every = {c.custom_id for j in jobs for c in state.get_chunks(j.id)}
    assert set(answers) == every and set(answers.values()) == {1}
    state.close()


def test_run_urgent_sends_every_file_synchronously_in_batch_mode(
    ray_session: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with EmulatorServer(EmulatorConfig(processing_seconds=0.5)) as emulator:
        env = {
            "PROCESSING_MODE": "batch",
            "RAYBATCH_HOME": str(tmp_path / "home"),
            "ANTHROPIC_BASE_URL": emulator.base_url,
            "ANTHROPIC_API_KEY": "test-key",
            "OCR_ENGINE": "none",
            "POLL_INTERVAL": "0.5",
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        source = one_page_pdfs(tmp_path / "urgent", "u", 2)
        assert main(["run", str(source), "--urgent", "--quiet", "--no-dashboard", "--json"]) == 0
        assert emulator.app.calls.get("create", 0) == 0
    settings = run_settings(tmp_path / "home")
    state = open_state(settings.section(StateSettings))
    jobs = state.list_jobs()
    assert len(jobs) == 2
    assert {(j.priority, j.mode, j.status) for j in jobs} == {(Priority.URGENT, "sync", JobStatus.COMPLETED)}
    assert {c.sent_mode for j in jobs for c in state.get_chunks(j.id)} == {"sync"}
    assert '"urgent"' in capsys.readouterr().out  # the status printed splits urgent and normal
    state.close()
