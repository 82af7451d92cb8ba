"""Real process deaths on local Ray (SIGKILL, not ray.kill): the run that was not killed finishes by
itself, every document is written once, and no chunk is paid for twice."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from pipeline_support import CorpusRun, chunk_answers, corpus_subset, warm_settings
from test_run_recovery import (
    FILES,
    Background,
    assert_written_once,
    describe,
    run_with_a_batch_in_flight,
    state_of,
)
from waiting import wait_for

from raybatch.claude.emulator import EmulatorServer
from raybatch.ids import OutputKeys
from raybatch.models import ChunkStatus, JobStatus, is_sync_tag
from raybatch.objects import LocalObjectStore
from raybatch.report import evaluate_run
from raybatch.settings import Settings

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def session_processes(title: str) -> list[int]:
    """pids under this test process (its own Ray) whose process title starts with ``title``."""
    pids, todo = [], _children(os.getpid())
    while todo:
        pid = todo.pop()
        todo.extend(_children(pid))
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if cmdline.startswith(title):
            pids.append(pid)
    return pids


def kill_one(title: str) -> int:
    """SIGKILL one process of this session's Ray titled ``title``; its pid."""
    found: list[int] = []
    wait_for(lambda: bool(found.extend(session_processes(title)) or found), what=f"a {title} process")
    os.kill(found[0], signal.SIGKILL)
    return found[0]


def assert_paid_once(emulator: EmulatorServer, unusable: frozenset[str] = frozenset()) -> None:
    """No chunk paid for twice, unless its first answer could not be used (lost with its process)."""
    paid = chunk_answers(emulator.app.answers())
    twice = {cid: n for cid, n in paid.items() if n > 1 and cid not in unusable}
    assert not twice, f"answers paid for more than once: {twice}"


def test_killing_a_prepare_task_and_a_writer(
    corpus_run: CorpusRun, emulator: EmulatorServer, tmp_path: Path
) -> None:
    truth = corpus_subset(corpus_run, FILES, tmp_path / "in")
    settings = warm_settings(corpus_run, tmp_path / "home", emulator)
    background = Background(settings, str(tmp_path / "in"))
    kill_one("ray::prepare")
    wait_for(
        lambda: any(j.status is JobStatus.WRITING for j in state_of(settings).list_jobs()),
        what="a job being written",
    )
    kill_one("ray::WriterActor")
    assert background.join().ok
    assert_written_once(settings, truth, emulator)
    assert_paid_once(emulator)


def test_killing_the_coordinators_process_while_a_batch_runs(
    corpus_run: CorpusRun, emulator: EmulatorServer, tmp_path: Path
) -> None:
    truth, settings, background = run_with_a_batch_in_flight(corpus_run, emulator, tmp_path)
    kill_one("ray::CoordinatorActor")
    assert background.join().ok
    assert_written_once(settings, truth, emulator)
    assert_paid_once(emulator)


def assert_documents_once(settings: Settings, truth: dict) -> None:
    """Every job completed, the split is exact, one row per document and one PDF per row."""
    state = state_of(settings)
    assert {j.status for j in state.list_jobs()} == {JobStatus.COMPLETED}
    rows = state.list_documents()
    assert len({(d.job_id, d.index) for d in rows}) == len(rows)
    jobs = OutputKeys(state.database_id()).jobs
    pdfs = {k for k in LocalObjectStore(settings.store).list(jobs) if k.endswith(".pdf")}
    assert pdfs == {d.pdf_key for d in rows}
    assert evaluate_run(state, truth)["boundary_f1"] == 1.0


def in_sync_calls(settings: Settings) -> set[str]:
    state = state_of(settings)
    return {
        c.custom_id
        for j in state.list_jobs()
        for c in state.get_chunks(j.id)
        if is_sync_tag(c.batch_id) and c.status is ChunkStatus.SUBMITTED
    }


def test_killing_the_coordinators_process_during_sync_calls(
    corpus_run: CorpusRun, emulator: EmulatorServer, tmp_path: Path
) -> None:
    emulator.faults.latency = 1.0  # calls stay in flight long enough to be cut short
    truth = corpus_subset(corpus_run, FILES, tmp_path / "in")
    settings = warm_settings(corpus_run, tmp_path / "home", emulator, processing_mode="sync")
    background = Background(settings, str(tmp_path / "in"))
    cut_short: set[str] = set()

    def calls_under_way() -> bool:
        cut_short.update(in_sync_calls(settings))
        return bool(cut_short) or background.report is not None or background.error is not None

    wait_for(calls_under_way, timeout=400, what="synchronous calls under way")
    assert cut_short, f"the run ended before any call was seen: {describe(state_of(settings))}"
    kill_one("ray::CoordinatorActor")
    # Calls begun between that look and the kill were cut short too: the dead process's calls
    # stay marked in the database until its successor recovers them, seconds later.
    cut_short.update(in_sync_calls(settings))
    emulator.faults.latency = 0.0
    assert background.join().ok
    assert_documents_once(settings, truth)
    # A call cut short may have been answered (and paid) with nobody left to read the answer.
    assert_paid_once(emulator, unusable=frozenset(cut_short))
