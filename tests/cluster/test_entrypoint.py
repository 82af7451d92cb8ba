"""The job entrypoint without Ray: progress lines and their pace, exit codes on bad settings, and
jobs/process.py as an alias of ``raybatch run``."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from raybatch import pipeline
from raybatch.loops.driver import Progress
from raybatch.terminal import ProgressLines, progress_line

ENTRYPOINT = Path(__file__).resolve().parents[2] / "jobs" / "process.py"


@pytest.fixture(scope="module")
def process() -> ModuleType:
    spec = importlib.util.spec_from_file_location("raybatch_job_process", ENTRYPOINT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _progress(done: int, total: int = 3, **fields: object) -> Progress:
    values: dict = {
        "total": total,
        "by_status": {"completed": done, "preparing": total - done},
        "pages_total": 60,
        "pages_prepared": 20 * done,
        "documents": 4 * done,
        "active_batches": 1,
        "writer_mb": 12.4,
        "paused": False,
        "elapsed": 42.4,
    }
    return Progress(**(values | fields))


def test_progress_line_reads_like_the_docs() -> None:
    line = progress_line(_progress(1, paused=True))
    assert line == (
        "progress: jobs 1/3 done (completed 1, preparing 2), pages 20/60, batches 1, "
        "writers 12 MB, documents 4, 42 s [paused]"
    )


def test_progress_lines_are_paced_but_the_last_is_always_printed() -> None:
    clock = iter([0.0, 1.0, 4.9, 5.0, 6.0, 6.5])
    lines: list[str] = []
    printer = ProgressLines(every=5.0, write=lines.append, monotonic=lambda: next(clock))
    for done in (0, 0, 1, 1, 2, 3):  # at t = 0, 1, 4.9, 5, 6, 6.5
        printer(_progress(done))
    assert [line.split(",")[0] for line in lines] == [
        "progress: jobs 0/3 done (completed 0",  # the first
        "progress: jobs 1/3 done (completed 1",  # 5 s later
        "progress: jobs 3/3 done (completed 3",  # the end, whatever the time
    ]


def test_bad_settings_exit_with_2_before_touching_ray(
    process: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("POLL_INTERVAL", "-1")
    monkeypatch.setattr(pipeline, "connect", lambda *a, **k: pytest.fail("joined Ray"))
    assert process.main(["/nowhere"]) == 2
    assert "POLL_INTERVAL" in capsys.readouterr().err


def test_without_a_key_or_emulator_the_job_stops_before_any_work(
    process: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("RAYBATCH_EMULATOR", raising=False)
    monkeypatch.setattr(pipeline, "connect", lambda *a, **k: pytest.fail("joined Ray"))
    db, store = tmp_path / "state.db", tmp_path / "store"
    assert process.main([str(tmp_path), "--db", f"sqlite:///{db}", "--store", str(store)]) == 2
    assert "ANTHROPIC_API_KEY is not set" in capsys.readouterr().err
    assert not db.exists() and not store.exists()


def test_the_old_entrypoint_is_raybatch_run(process: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[list[str]] = []
    monkeypatch.setattr(process, "raybatch", lambda argv: taken.append(argv) or 0)
    assert process.main(["s3://in/x", "--every", "1", "-v"]) == 0
    assert taken == [["run", "s3://in/x", "--every", "1", "-v"]]


def test_raybatch_run_takes_the_old_entrypoints_flags_after_the_source() -> None:
    from raybatch.cli import _parser

    args = _parser().parse_args(["run", "in", "--every", "1", "-v", "--emulator", "--force"])
    assert (args.every, args.verbose, args.raybatch_emulator, args.force) == (1.0, True, True, True)
    assert _parser().parse_args(["-v", "run", "in"]).verbose is True  # the top-level flag stands
    assert _parser().parse_args(["run", "in"]).verbose is False
