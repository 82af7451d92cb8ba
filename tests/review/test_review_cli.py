"""``raybatch review`` and ``eval --reviewed`` in-process, on a SQLite file and a local folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from review_support import answered_job, write_job

from raybatch.cli import main
from raybatch.objects import LocalObjectStore
from raybatch.samples import write_samples
from raybatch.state import SqlStateStore


@pytest.fixture
def place(tmp_path: Path) -> tuple[list[str], SqlStateStore, int]:
    url, folder = f"sqlite:///{tmp_path / 'state.db'}", tmp_path / "store"
    state = SqlStateStore.from_url(url)
    state.migrate()
    truth = write_samples(tmp_path / "samples", bundles=1, seed=7)
    job = answered_job(state, tmp_path / "samples", truth["bundles"][0])
    write_job(state, LocalObjectStore(folder), job, review_below=1.0)
    return ["--db", url, "--store", str(folder)], state, job


def cli(words: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    code = main(words)
    text = capsys.readouterr()
    try:
        return code, json.loads(text.out)
    except json.JSONDecodeError:
        return code, text.out + text.err


def test_list_filters_by_class_and_reason(place: tuple[list[str], SqlStateStore, int], capsys: Any) -> None:
    where, state, job = place
    code, queue = cli(["review", "list", "--json", *where], capsys)
    assert code == 0 and len(queue["documents"]) == len(state.list_documents(job)) and queue["next"] is None
    assert queue["documents"][0]["doc"] == f"{job}:0" and queue["documents"][0]["review"] == "pending"
    code, contracts = cli(["review", "list", "--json", "--class", "contract", *where], capsys)
    assert {entry["doc_type"] for entry in contracts["documents"]} == {"contract"}
    none = {"documents": [], "more": 0, "next": None}
    assert cli(["review", "list", "--json", "--reason", "ocr", *where], capsys)[1] == none


def test_list_is_paged(place: tuple[list[str], SqlStateStore, int], capsys: Any) -> None:
    where, state, job = place
    count = len(state.list_documents(job))
    code, first = cli(["review", "list", "--json", "--limit", "3", *where], capsys)
    assert code == 0 and [e["doc"] for e in first["documents"]] == [f"{job}:{i}" for i in range(3)]
    assert (first["more"], first["next"]) == (count - 3, f"{job}:2")
    code, rest = cli(["review", "list", "--json", "--after", first["next"], "--limit", "100", *where], capsys)
    assert [e["doc"] for e in rest["documents"]] == [f"{job}:{i}" for i in range(3, count)]
    assert (rest["more"], rest["next"]) == (0, None)
    code, text = cli(["review", "list", "--limit", "3", "--class", "contract", *where], capsys)
    assert code == 0 and "3 documents pending" in text and "more wait" not in text  # exactly three
    code, text = cli(["review", "list", "--limit", "2", "--class", "contract", *where], capsys)
    assert f"1 more wait: raybatch review list --after {job}:3 --limit 2 --class contract" in text
    code, text = cli(["review", "list", "--after", "nonsense", *where], capsys)
    assert code != 0 and "JOB:INDEX" in text


def test_a_correction_is_shown_with_its_versions_and_scored_by_eval_reviewed(
    place: tuple[list[str], SqlStateStore, int], capsys: Any, tmp_path: Path
) -> None:
    where, _, job = place
    code, done = cli(
        ["review", "set", f"{job}:0", "--type", "letter", "--reviewer", "ann", "--json", *where], capsys
    )
    assert code == 0 and done["applied"] and done["written"] == [f"{job}:0 v2"]
    code, again = cli(
        ["review", "set", f"{job}:0", "--type", "letter", "--version", "1", "--json", *where], capsys
    )
    assert code == 0 and not again["applied"]
    code, shown = cli(["review", "show", f"{job}:0", "--json", *where], capsys)
    assert (shown["document"]["version"], [v["version"] for v in shown["versions"]]) == (2, [1])
    assert [c["reviewer"] for c in shown["corrections"]] == ["ann"]
    code, figures = cli(["eval", "--reviewed", "--json", *where], capsys)
    assert (figures["jobs_reviewed"], figures["boundary_f1"], figures["type_accuracy"]) == (
        1,
        1.0,
        pytest.approx(14 / 15),
    )
    [bundle] = figures["bundles"].values()
    assert [(e["first_page"], e["expected"], e["found"]) for e in bundle["type_errors"]] == [
        (1, "letter", "act")
    ]
    exported = tmp_path / "reviewed.json"
    assert cli(["review", "export", str(exported), *where], capsys)[0] == 0
    code, scored = cli(["eval", "--truth", str(exported), "--json", *where], capsys)
    assert code == 0 and scored["type_accuracy"] == 1.0 and scored["documents_exact"] == 15


def test_a_stale_correction_exits_with_the_conflict(
    place: tuple[list[str], SqlStateStore, int], capsys: Any
) -> None:
    where, _, job = place
    assert cli(["review", "accept", f"{job}:1", "--version", "1", *where], capsys)[0] == 0
    code, text = cli(["review", "merge", f"{job}:1", "--version", "1", "--reviewer", "bob", *where], capsys)
    assert code == 1 and "ReviewConflict" in text and "version 2, not 1" in text
    code, text = cli(["review", "set", f"{job}:1", "--field", "amount", *where], capsys)
    assert code == 2 and "NAME=VALUE" in text
