"""Real process deaths on local Ray (SIGKILL, not ray.kill): the run that was not killed finishes by
itself, every document is written once, and no chunk is paid for twice."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from pipeline_support import CorpusRun, corpus_subset, warm_settings
from test_run_recovery import Background, assert_written_once, state_of, wait_for

from raybatch.claude.emulator import EmulatorServer
from raybatch.models import JobStatus

pytestmark = [pytest.mark.ray, pytest.mark.slow]

FILES = ["bundle_000.pdf", "bundle_002.pdf"]


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


def assert_paid_once(emulator: EmulatorServer) -> None:
    twice = {cid: n for cid, n in emulator.app.answers().items() if n > 1}
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
