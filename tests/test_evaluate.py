"""Evaluate: boundary scores, splits and type accuracy on crafted cases."""

from __future__ import annotations

import json
from typing import Any

import pytest

from raybatch.evaluate import evaluate
from raybatch.models import DocumentRecord


def _bundle(file: str, docs: list[tuple[int, int, str]], blanks: tuple[int, ...] = ()) -> dict[str, Any]:
    pages = docs[-1][1]
    return {
        "file": file,
        "sha256": "0" * 64,
        "pages": pages,
        "page_info": [
            {"page": p, "scanned": False, "rotation": 0, "blank": p in blanks, "size": "A4"}
            for p in range(1, pages + 1)
        ],
        "documents": [
            {"index": i, "first_page": first, "last_page": last, "type": kind}
            for i, (first, last, kind) in enumerate(docs)
        ],
    }


TRUTH = {
    "bundles": [
        _bundle("a.pdf", [(1, 3, "contract"), (4, 4, "invoice"), (5, 8, "act")]),
        _bundle("b.pdf", [(1, 2, "letter"), (3, 6, "invoice")]),
    ],
    "groups": [],
}


def _found(spec: dict[str, list[tuple[int, int, str]]]) -> dict[str, list[DocumentRecord]]:
    return {
        file: [
            DocumentRecord(job_id=1, index=i, first_page=first, last_page=last, doc_type=kind)
            for i, (first, last, kind) in enumerate(docs)
        ]
        for file, docs in spec.items()
    }


PERFECT = {
    "a.pdf": [(1, 3, "contract"), (4, 4, "invoice"), (5, 8, "act")],
    "b.pdf": [(1, 2, "letter"), (3, 6, "invoice")],
}


def test_perfect() -> None:
    result = evaluate(TRUTH, _found(PERFECT))
    assert result["boundary_f1"] == result["boundary_precision"] == result["boundary_recall"] == 1.0
    assert result["type_accuracy"] == 1.0
    assert (result["documents_expected"], result["documents_found"], result["documents_exact"]) == (5, 5, 5)
    assert (result["boundaries_expected"], result["over_splits"], result["under_splits"]) == (3, 0, 0)
    assert result["missing_bundles"] == [] and result["unexpected_bundles"] == []
    json.dumps(result)  # the CLI prints it as one object


def test_one_over_split() -> None:
    found = dict(PERFECT, **{"a.pdf": [(1, 3, "contract"), (4, 4, "invoice"), (5, 6, "act"), (7, 8, "act")]})
    result = evaluate(TRUTH, _found(found))
    assert result["boundary_recall"] == 1.0
    assert result["boundary_precision"] == pytest.approx(3 / 4)
    assert result["boundary_f1"] == pytest.approx(2 * 0.75 / 1.75, abs=1e-6)
    assert (result["over_splits"], result["under_splits"]) == (1, 0)
    assert result["bundles"]["a.pdf"]["false_boundaries"] == [7]
    assert (result["documents_found"], result["documents_exact"]) == (6, 4)


def test_one_under_split() -> None:
    found = dict(PERFECT, **{"a.pdf": [(1, 3, "contract"), (4, 8, "invoice")]})
    result = evaluate(TRUTH, _found(found))
    assert result["boundary_precision"] == 1.0
    assert result["boundary_recall"] == pytest.approx(2 / 3, abs=1e-6)
    assert (result["over_splits"], result["under_splits"]) == (0, 1)
    assert result["bundles"]["a.pdf"]["missed_boundaries"] == [5]


def test_wrong_type() -> None:
    found = dict(PERFECT, **{"b.pdf": [(1, 2, "letter"), (3, 6, "act")]})
    result = evaluate(TRUTH, _found(found))
    assert result["boundary_f1"] == 1.0
    assert result["type_accuracy"] == pytest.approx(4 / 5)
    assert result["bundles"]["b.pdf"]["type_errors"] == [
        {"first_page": 3, "last_page": 6, "expected": "invoice", "found": "act"}
    ]


def test_missing_bundle() -> None:
    result = evaluate(TRUTH, _found({"a.pdf": PERFECT["a.pdf"]}))
    assert result["missing_bundles"] == ["b.pdf"]
    assert result["bundles"]["b.pdf"]["missing"] is True
    assert result["boundary_precision"] == 1.0
    assert result["boundary_recall"] == pytest.approx(2 / 3, abs=1e-6)
    assert (result["documents_expected"], result["documents_found"]) == (5, 3)


def test_nothing_found() -> None:
    result = evaluate(TRUTH, {})
    assert result["boundary_f1"] == 0.0 and result["type_accuracy"] == 0.0
    assert result["documents_found"] == 0


def test_first_page_is_not_a_boundary() -> None:
    truth = {"bundles": [_bundle("one.pdf", [(1, 5, "contract")])], "groups": []}
    assert evaluate(truth, _found({"one.pdf": [(1, 5, "contract")]}))["boundary_f1"] == 1.0
    split = evaluate(truth, _found({"one.pdf": [(1, 2, "contract"), (3, 5, "contract")]}))
    assert (split["boundary_precision"], split["boundary_recall"], split["over_splits"]) == (0.0, 0.0, 1)
    assert split["bundles"]["one.pdf"]["false_boundaries"] == [3]


def test_unexpected_bundles_are_listed_not_scored() -> None:
    found = dict(PERFECT, **{"stray.pdf": [(1, 1, "other")]})
    result = evaluate(TRUTH, _found(found))
    assert result["unexpected_bundles"] == ["stray.pdf"]
    assert result["boundary_f1"] == 1.0 and result["documents_found"] == 5


def test_found_keys_may_be_paths_and_documents_dicts() -> None:
    found = {
        "/store/in/a.pdf": [{"first_page": f, "last_page": e, "type": t} for f, e, t in PERFECT["a.pdf"]],
        "s3://in/b.pdf": [
            {"first_page": f, "last_page": last, "doc_type": t.upper()} for f, last, t in PERFECT["b.pdf"]
        ],
    }
    result = evaluate(TRUTH, found)
    assert result["boundary_f1"] == 1.0 and result["type_accuracy"] == 1.0


def test_blank_pages_at_a_border_can_be_forgiven() -> None:
    bundle = _bundle("c.pdf", [(1, 4, "contract"), (5, 7, "invoice")], blanks=(4,))
    truth = {"bundles": [bundle], "groups": []}
    blank_moved = _found({"c.pdf": [(1, 3, "contract"), (4, 7, "invoice")]})
    strict = evaluate(truth, blank_moved)
    assert strict["boundary_f1"] == 0.0 and strict["over_splits"] == 1
    lenient = evaluate(truth, blank_moved, ignore_blank_pages=True)
    assert lenient["boundary_f1"] == 1.0 and lenient["documents_exact"] == 2


def test_pydantic_truth_is_accepted() -> None:
    truth_module = pytest.importorskip("raybatch.samples.truth")
    fields = {
        "title": "",
        "date": "2024-01-01",
        "number": "1",
        "counterparty": "X",
        "amount": None,
        "currency": None,
        "reference": "R",
        "language": "en",
        "group": "g",
    }
    docs = [
        {"index": i, "first_page": first, "last_page": last, "type": kind, **fields}
        for i, (first, last, kind) in enumerate(PERFECT["b.pdf"])
    ]
    bundle = dict(_bundle("b.pdf", PERFECT["b.pdf"]), documents=docs)
    truth = truth_module.Truth.model_validate({"seed": 1, "bundles": [bundle], "groups": []})
    assert evaluate(truth, _found({"b.pdf": PERFECT["b.pdf"]}))["boundary_f1"] == 1.0


def test_sample_corpus_truth_scores_perfect_against_itself() -> None:
    samples = pytest.importorskip("raybatch.samples")
    write = pytest.importorskip("raybatch.samples.write")
    plan = samples.plan_corpus(4, 7)
    truth = {"bundles": [write.bundle_truth(b, "0" * 64) for b in plan.bundles], "groups": []}
    found = {bundle["file"]: bundle["documents"] for bundle in truth["bundles"]}
    for lenient in (False, True):
        result = evaluate(truth, found, ignore_blank_pages=lenient)
        assert (result["boundary_f1"], result["type_accuracy"]) == (1.0, 1.0)
        assert result["boundaries_expected"] > 4
        assert result["documents_found"] == result["documents_expected"] == result["documents_exact"]
