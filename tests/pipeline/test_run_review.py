"""Done when: the sample corpus run with the emulator's doubt, reviewed through the CLI (split,
merge, change a class, set a field, accept); new PDFs, kept versions, rows, manifest and Parquet; a
rerun and a ``--force`` run that keep every correction; two reviewers' conflict; ``eval --reviewed``
reporting exactly the errors that were corrected."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymupdf
import pytest
from pipeline_support import run_settings

from raybatch.cli import main
from raybatch.ids import OutputKeys
from raybatch.objects import LocalObjectStore
from raybatch.pipeline import run
from raybatch.samples import write_samples
from raybatch.settings import Settings, StateSettings
from raybatch.state import SqlStateStore, open_state
from raybatch.steps.table_files import read_documents_table

pytestmark = [pytest.mark.ray, pytest.mark.slow]

DOUBT = {
    "wrong_split_fraction": 1.0,  # the database's mark changes each custom_id: only 1.0 is sure to hit
    "wrong_class_fraction": 1.0,
    "wrong_field_fraction": 1.0,
    "low_confidence_fraction": 0.3,
}


@dataclass
class Corrected:
    """What the test corrected, to compare with ``eval --reviewed``."""

    splits: int = 0
    merges: int = 0
    types: int = 0
    fields: list[tuple[int, str]] = field(default_factory=list)  # (first page, field)
    accepted: int = 0
    model_spans: set[tuple[int, int]] = field(default_factory=set)


def cli(settings: Settings, *words: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    where = ["--db", settings.database_url.get_secret_value(), "--store", settings.store]
    code = main([*words, *where])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def correct_structure(
    settings: Settings, state: SqlStateStore, job: int, truth: dict[str, Any], capsys: Any, done: Corrected
) -> None:
    """Split where the truth starts a document and the model did not; merge where it is the other way."""
    starts = {d["first_page"] for d in truth["documents"]}
    while True:
        docs = state.list_documents(job)
        found = {d.first_page: d.index for d in docs}
        missed = sorted(starts - set(found))
        false = sorted(set(found) - starts)
        if missed:
            holder = next(d for d in docs if d.first_page < missed[0] <= d.last_page)
            code, text = cli(
                settings,
                "review",
                "split",
                f"{job}:{holder.index}",
                "--at",
                str(missed[0]),
                "--reviewer",
                "ann",
                capsys=capsys,
            )
            done.splits += 1
        elif false:
            code, text = cli(
                settings,
                "review",
                "merge",
                f"{job}:{found[false[0]] - 1}",
                "--reviewer",
                "ann",
                capsys=capsys,
            )
            done.merges += 1
        else:
            return
        assert code == 0, text


def correct_contents(
    settings: Settings, state: SqlStateStore, job: int, truth: dict[str, Any], capsys: Any, done: Corrected
) -> None:
    """Set the class and the amount/number the model got wrong; accept what is still pending. Only
    documents the model split exactly are scored for class and fields: those are counted."""
    expected = {d["first_page"]: d for d in truth["documents"]}
    for doc in state.list_documents(job):
        want, scored = expected[doc.first_page], (doc.first_page, doc.last_page) in done.model_spans
        words = []
        if doc.doc_type != want["type"]:
            words += ["--type", want["type"]]
            done.types += scored
        for name in ("amount", "number"):
            if _differs(getattr(doc, name), want[name]):
                words += ["--field", f"{name}={want[name]}"]
                done.fields += [(doc.first_page, name)] if scored else []
        if words:
            code, text = cli(
                settings, "review", "set", f"{job}:{doc.index}", *words, "--reviewer", "bob", capsys=capsys
            )
        elif doc.review == "pending":
            code, text = cli(settings, "review", "accept", f"{job}:{doc.index}", capsys=capsys)
            done.accepted += 1
        else:
            continue
        assert code == 0, text


def _differs(found: Any, want: Any) -> bool:
    """As ``eval`` compares: amounts to the cent, text ignoring case and spaces."""
    if want is None:
        return False
    if isinstance(want, float):
        return found is None or abs(float(found) - want) >= 0.005
    return " ".join(str(found or "").lower().split()) != " ".join(str(want).lower().split())


def test_a_doubting_run_is_reviewed_through_the_cli(
    ray_session: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    truth = write_samples(tmp_path / "samples", bundles=1, seed=7)
    settings = run_settings(tmp_path, raybatch_emulator=True, emulator_doubt=json.dumps(DOUBT))
    report = run(settings, str(tmp_path / "samples"))
    assert report.ok
    [job] = [j.id for j in report.jobs]
    state = open_state(settings.section(StateSettings))
    store = LocalObjectStore(settings.store)
    code, text = cli(settings, "review", "list", "--json", capsys=capsys)
    queue = json.loads(text)["documents"]
    assert code == 0 and queue and all(entry["review"] == "pending" for entry in queue)
    done = Corrected(model_spans={(d.first_page, d.last_page) for d in state.list_documents(job)})
    correct_structure(settings, state, job, truth["bundles"][0], capsys, done)
    correct_contents(settings, state, job, truth["bundles"][0], capsys, done)
    assert done.splits + done.merges >= 1 and done.types >= 1 and done.fields and done.accepted >= 1
    reviewed = state.list_documents(job)
    assert [(d.first_page, d.last_page, d.doc_type) for d in reviewed] == [
        (d["first_page"], d["last_page"], d["type"]) for d in truth["bundles"][0]["documents"]
    ]
    assert all(d.review in ("accepted", "corrected", "none") for d in reviewed)

    keys = OutputKeys(state.database_id())
    for doc in reviewed:  # new PDFs hold exactly their pages
        with pymupdf.open("pdf", store.get(doc.pdf_key or "")) as pdf:
            assert pdf.page_count == doc.last_page - doc.first_page + 1
    versions = state.document_versions(job)
    assert versions and all(store.exists(v.record.pdf_key or "") for v in versions)
    manifest = json.loads(store.get(keys.manifest(job)))
    assert [(d["first_page"], d["version"], d["review"]) for d in manifest["documents"]] == [
        (d.first_page, d.version, d.review) for d in reviewed
    ]
    files = [store.get(key) for key in store.list(f"{keys.documents_table}/")]
    table = [row for row in read_documents_table(files).to_pylist() if row["job_id"] == job]
    assert [(r["index"], r["version"], r["review"]) for r in table] == [
        (d.index, d.version, d.review) for d in reviewed
    ]

    code, text = cli(settings, "eval", "--reviewed", "--json", capsys=capsys)
    figures = json.loads(text)
    assert figures["boundaries_found"] - figures["boundaries_matched"] == done.merges
    assert figures["boundaries_expected"] - figures["boundaries_matched"] == done.splits
    [bundle] = figures["bundles"].values()
    assert len(bundle["type_errors"]) == done.types
    assert sorted((e["first_page"], e["field"]) for e in bundle["field_errors"]) == sorted(done.fields)

    assert run(settings, str(tmp_path / "samples")).ok  # a rerun: nothing replaces the review
    assert state.list_documents(job) == reviewed
    forced = run(settings, str(tmp_path / "samples"), force=True)
    [again] = [j.id for j in forced.jobs]
    assert again != job
    assert [
        (d.first_page, d.last_page, d.doc_type, d.amount, d.review) for d in state.list_documents(again)
    ] == [(d.first_page, d.last_page, d.doc_type, d.amount, d.review) for d in reviewed]

    first = f"{job}:0"
    version = str(state.list_documents(job)[0].version)
    assert (
        cli(
            settings,
            "review",
            "set",
            first,
            "--type",
            "letter",
            "--version",
            version,
            "--reviewer",
            "ann",
            capsys=capsys,
        )[0]
        == 0
    )
    code, text = cli(
        settings,
        "review",
        "set",
        first,
        "--type",
        "receipt",
        "--version",
        version,
        "--reviewer",
        "bob",
        capsys=capsys,
    )
    assert code == 1 and "ReviewConflict" in text
    assert state.list_documents(job)[0].doc_type == "letter"

    versions, far = len(state.document_versions(job)), state.list_documents(job)[-1]
    [sent] = [c.sent_at for c in state.get_chunks(job) if c.n == 0]
    spent = state.usage_totals(job)
    fast = ["--emulator", "--poll-interval", "0.5", "--quiet"]  # no doubt now: the emulator as it is
    code, text = cli(settings, "redo", f"{job}:0", "--fresh", *fast, capsys=capsys)
    assert code == 0 and "cost $" in text, text
    [asked] = [c for c in state.get_chunks(job) if c.n == 0]
    assert asked.sent_at and sent and asked.sent_at > sent  # asked again, past the answer cache
    assert asked.input_tokens > 0 and asked.reused_from is None
    assert state.usage_totals(job).input_tokens == spent.input_tokens + asked.input_tokens  # both counted
    assert state.list_corrections(job)[-1].kind == "redo" and len(state.document_versions(job)) > versions
    last = state.list_documents(job)[-1]  # away from the redone pages: as reviewed (its index may move)
    assert (last.first_page, last.doc_type, last.amount, last.review) == (
        far.first_page,
        far.doc_type,
        far.amount,
        far.review,
    )
