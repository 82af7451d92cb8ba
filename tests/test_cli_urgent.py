"""``raybatch urgent`` and ``run --urgent`` without Ray; ``status`` splits urgent and normal."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from raybatch.cli import main
from raybatch.models import JobStatus, Priority, SourceKind
from raybatch.settings import StateSettings
from raybatch.state import SqlStateStore, open_state


def job_in(state: SqlStateStore, path: Path, status: JobStatus) -> int:
    sha = hashlib.sha256(str(path).encode()).hexdigest()
    job, _ = state.register_job(
        sha256=sha, source_uri=path.as_uri(), source_name=path.name, kind=SourceKind.PDF, size_bytes=3
    )
    if status is not JobStatus.PENDING:
        state.transition(job.id, [JobStatus.PENDING], status)
    return job.id


def test_urgent_says_what_it_did_for_each_job(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = open_state(StateSettings(database_url=db))
    pending = job_in(state, tmp_path / "a.pdf", JobStatus.PENDING)
    sent = job_in(state, tmp_path / "b.pdf", JobStatus.SUBMITTED)
    done = job_in(state, tmp_path / "c.pdf", JobStatus.COMPLETED)
    assert main(["urgent", str(pending), str(sent), str(done), "--db", db]) == 0
    out = capsys.readouterr().out
    assert f"job {pending}: urgent: sent synchronously" in out
    assert f"job {sent}: stays in a batch" in out
    assert f"job {done}: already completed" in out
    assert state.get_job(pending).priority is Priority.URGENT and state.get_job(pending).mode == "sync"
    assert main(["urgent", str(sent), "--pull", "--db", db]) == 0
    assert "cannot cancel single requests" in capsys.readouterr().out
    assert main(["urgent", "--db", db]) == 2


def test_urgent_source_takes_every_job_registered_from_it(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = open_state(StateSettings(database_url=db))
    inside = [job_in(state, tmp_path / "in" / f"{n}.pdf", JobStatus.PENDING) for n in range(2)]
    outside = job_in(state, tmp_path / "out.pdf", JobStatus.PENDING)
    assert main(["urgent", "--source", str(tmp_path / "in"), "--db", db]) == 0
    assert {j.id for j in state.list_jobs() if j.priority is Priority.URGENT} == set(inside)
    assert state.get_job(outside).priority is Priority.NORMAL
    assert main(["urgent", "--source", str(tmp_path / "none"), "--db", db]) == 1
    assert "no jobs registered from" in capsys.readouterr().out
    assert main(["status", "--db", db, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    by_priority = summary["by_priority"]
    assert by_priority["urgent"]["pending"] == 2 and by_priority["normal"]["pending"] == 1
    assert main(["status", "--db", db]) == 0
    assert "urgent" in capsys.readouterr().out


def test_run_urgent_asks_for_urgent_jobs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import raybatch.commands

    asked: dict[str, Any] = {}
    monkeypatch.setattr(raybatch.commands, "run_source", lambda settings, source, **kw: asked.update(kw) or 0)
    monkeypatch.setenv("RAYBATCH_HOME", str(tmp_path))
    assert main(["run", str(tmp_path), "--urgent", "--emulator"]) == 0
    assert asked["urgent"] is True
    assert main(["run", str(tmp_path), "--emulator"]) == 0
    assert asked["urgent"] is False
