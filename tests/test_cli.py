"""The CLI's commands that need no Ray: samples, status, pause/resume, cancel, eval (and bad flags)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from rich.logging import RichHandler

import raybatch
from raybatch import terminal as console
from raybatch.cli import main
from raybatch.ids import sha256_file
from raybatch.models import DocumentRecord, JobStatus, SourceKind
from raybatch.settings import Settings, StateSettings
from raybatch.state import SqlStateStore, open_state


def state_of(db: str) -> SqlStateStore:
    return open_state(StateSettings(database_url=db))


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_samples_writes_bundles_and_truth(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["samples", str(tmp_path / "s"), "--bundles", "2", "--seed", "3"]) == 0
    truth = json.loads((tmp_path / "s" / "truth.json").read_text())
    assert [b["file"] for b in truth["bundles"]] == ["bundle_000.pdf", "bundle_001.pdf"]
    assert "wrote 2 bundles" in capsys.readouterr().out


def test_status_json_pause_resume_and_cancel(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    job, _ = state_of(db).register_job(
        sha256="a" * 64, source_uri="file:///x.pdf", source_name="x.pdf", kind=SourceKind.PDF, size_bytes=3
    )
    assert main(["pause", "--db", db]) == 0
    assert main(["status", "--db", db, "--json"]) == 0
    summary = last_json(capsys.readouterr().out)
    assert summary["paused"] is True and summary["by_status"]["pending"] == 1
    assert main(["resume", "--db", db]) == 0
    assert main(["cancel", str(job.id), "--db", db]) == 0
    assert main(["cancel", str(job.id), "--db", db]) == 1  # already ended
    capsys.readouterr()
    assert main(["status", "--db", db, "--json", "--jobs"]) == 0
    summary = last_json(capsys.readouterr().out)
    assert summary["paused"] is False
    assert summary["job_list"][0]["status"] == "canceled"


def test_eval_json_scores_what_the_database_holds(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["samples", str(tmp_path / "s"), "--bundles", "2"]) == 0
    truth = json.loads((tmp_path / "s" / "truth.json").read_text())
    state = state_of(db)
    for bundle in truth["bundles"]:
        path = tmp_path / "s" / bundle["file"]
        job, _ = state.register_job(
            sha256=sha256_file(path),
            source_uri=path.as_uri(),
            source_name=bundle["file"],
            kind=SourceKind.PDF,
            size_bytes=path.stat().st_size,
        )
        docs = [
            DocumentRecord(job.id, d["index"], d["first_page"], d["last_page"], d["type"])
            for d in bundle["documents"]
        ]
        docs[-1] = DocumentRecord(job.id, docs[-1].index, docs[-1].first_page, docs[-1].last_page, "other")
        state.upsert_documents(job.id, docs)
        state.transition(job.id, [JobStatus.PENDING], JobStatus.COMPLETED)
    capsys.readouterr()
    assert main(["eval", "--truth", str(tmp_path / "s" / "truth.json"), "--db", db, "--json"]) == 0
    figures = last_json(capsys.readouterr().out)
    expected = sum(len(b["documents"]) for b in truth["bundles"])
    assert figures["boundary_f1"] == 1.0
    assert figures["documents_expected"] == figures["documents_found"] == expected
    assert figures["type_accuracy"] == pytest.approx((expected - 2) / expected)
    for key in ("boundary_precision", "boundary_recall"):
        assert figures[key] == 1.0


def test_bad_settings_exit_2_naming_the_variable(monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("POLL_INTERVAL", "often")
    assert main(["status"]) == 2
    assert "POLL_INTERVAL" in capsys.readouterr().err


def test_run_without_a_key_or_emulator_exits_2_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("RAYBATCH_EMULATOR", raising=False)
    monkeypatch.chdir(tmp_path)  # nothing may appear here either (the default home is relative)
    assert main(["samples", "s", "--bundles", "1"]) == 0
    before = sorted(p.name for p in tmp_path.iterdir())
    db, store = tmp_path / "state.db", tmp_path / "store"
    assert main(["run", "s", "--db", f"sqlite:///{db}", "--store", str(store), "--quiet"]) == 2
    assert "--emulator" in capsys.readouterr().err
    assert not db.exists() and not store.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])

    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"raybatch {raybatch.__version__}"


def one_line(err: str) -> str:
    """The only line a failed command printed: no traceback."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("command", ["cancel", "urgent", "retry"])
def test_an_unknown_job_is_one_line_and_exit_2_for_every_command(
    db: str, state: Any, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "999", "--db", db]) == 2

    assert one_line(capsys.readouterr().err).startswith("raybatch: no job 999 in sqlite:///")


@pytest.mark.parametrize(
    "words", [["status"], ["cancel", "1"], ["urgent", "1"], ["retry", "1"], ["pause"], ["resume"]]
)
def test_commands_that_need_a_database_never_create_one(
    tmp_path: Path, words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nodir" / "x.db"
    assert main([*words, "--db", f"sqlite:///{missing}"]) == 2

    assert (
        one_line(capsys.readouterr().err)
        == f"raybatch: no database at {missing}: run `raybatch run` first, or name one with --db"
    )
    assert not missing.parent.exists()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "No such file or directory"),
        ("{bad", "is not JSON"),
        ('{"x": 1}', "is not a truth.json: bundles: Field required"),
        ('{"bundles": [{"file": "a.pdf", "pages": 2, "documents": [{}]}]}', "documents.0.first_page"),
    ],
)
def test_eval_of_a_missing_or_malformed_truth_file_is_one_line_and_exit_2(
    tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str], content: str | None, reason: str
) -> None:
    truth = tmp_path / "truth.json"
    if content is not None:
        truth.write_text(content)

    assert main(["eval", "--truth", str(truth), "--db", db]) == 2

    line = one_line(capsys.readouterr().err)
    assert f"truth file {truth}" in line and reason in line


def test_a_path_that_cannot_be_written_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("")

    assert main(["samples", str(tmp_path / "file" / "out"), "--bundles", "1"]) == 1
    assert "Not a directory" in one_line(capsys.readouterr().err)


def test_an_unsupported_database_url_is_a_settings_error_with_its_password_masked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["status", "--db", "mysql://raybatch:hunter2@db/raybatch"]) == 2

    line = one_line(capsys.readouterr().err)
    assert "DATABASE_URL" in line and "sqlite" in line and "hunter2" not in line


def test_an_unexpected_error_is_one_masked_line_and_its_traceback_only_with_v(
    db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*_: object, **__: object) -> int:
        raise RuntimeError("lost postgresql://raybatch:hunter2@db/raybatch")

    monkeypatch.setattr("raybatch.commands.show_status", broken)

    assert main(["status", "--db", db]) == 1
    line = one_line(capsys.readouterr().err)
    assert "unexpected RuntimeError: lost postgresql://raybatch:***@db/raybatch" in line
    assert main(["-v", "status", "--db", db]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "broken" in err and "hunter2" not in err.split("Traceback")[0]


def test_log_records_go_through_the_progress_bars_console(db: str, state: Any) -> None:
    assert main(["status", "--db", db]) == 0

    handlers = [h for h in logging.getLogger().handlers if isinstance(h, RichHandler)]
    assert len(handlers) == 1 and handlers[0].console is console.errors
    assert main(["status", "--db", db]) == 0  # configured again, never twice
    assert len([h for h in logging.getLogger().handlers if isinstance(h, RichHandler)]) == 1


def test_demo_takes_the_tuning_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Settings] = []
    monkeypatch.setattr("raybatch.commands.run_demo", lambda settings, *_, **__: seen.append(settings) or 0)
    flags = ["--result-workers", "3", "--max-concurrent-mb", "512", "--batch-size", "7"]
    flags += ["--poll-interval", "2", "--ocr-engine", "none", "--modality", "images", "--mode", "sync"]

    assert main(["demo", "--out", str(tmp_path / "demo"), *flags]) == 0

    [settings] = seen
    assert (settings.result_workers, settings.max_concurrent_mb, settings.batch_size) == (3, 512, 7)
    assert (settings.poll_interval, settings.ocr_engine, settings.page_modality) == (2.0, "none", "images")
    assert settings.processing_mode == "sync" and settings.raybatch_home == tmp_path / "demo"


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["samples", "out", "--bundles", "0"], "not a whole number of at least 1"),
        (["emulator", "--port", "99999"], "not a port"),
    ],
)
def test_out_of_range_numbers_are_refused_by_the_parser(
    argv: list[str], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)

    assert exit_.value.code == 2
    assert reason in capsys.readouterr().err
