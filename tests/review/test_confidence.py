"""Confidence from signals: each signal lowers the score and says why; thresholds per class."""

from __future__ import annotations

import pytest

from raybatch.review.confidence import (
    FieldProblem,
    FieldSpec,
    Signals,
    check_values,
    reason_code,
    score,
    threshold_for,
)

FIELDS = ("date", "amount")


def test_a_document_without_doubts_scores_one() -> None:
    result = score(Signals(doc_type="invoice", model_confidence=1.0, ocr_confidences=(0.95,)), FIELDS)
    assert (result.score, result.reasons) == (1.0, ())
    assert result.fields == {"date": 1.0, "amount": 1.0}


@pytest.mark.parametrize(
    ("signals", "code", "expected"),
    [
        (Signals(doc_type="act", model_confidence=0.4), "model", 0.4),
        (Signals(doc_type="act", ocr_confidences=(0.99, 0.45)), "ocr", 0.5),
        (Signals(doc_type="act", problems=(FieldProblem("date", "required"),)), "required", 0.7),
        (Signals(doc_type="act", problems=(FieldProblem("amount", "type"),)), "type", 0.7),
        (Signals(doc_type="act", border=("continuation flags disagree at page 9",)), "border", 0.75),
        (Signals(doc_type="act", repaired=True), "repaired", 0.9),
        (Signals(doc_type="other"), "other", 0.6),
    ],
)
def test_each_signal_lowers_the_score_with_its_reason(signals: Signals, code: str, expected: float) -> None:
    result = score(signals, FIELDS)
    assert result.score == pytest.approx(expected)
    assert [reason_code(r) for r in result.reasons] == [code]


def test_doubts_multiply_and_the_score_stays_in_range() -> None:
    many = Signals(
        doc_type="other",
        model_confidence=-3.0,
        problems=(FieldProblem("date", "format"),) * 20,
        repaired=True,
    )
    assert score(many, FIELDS).score == 0.0
    two = score(Signals(doc_type="other", model_confidence=0.5), FIELDS)
    assert two.score == pytest.approx(0.3)
    assert score(Signals(doc_type="act", model_confidence=7.0), FIELDS).score == 1.0


def test_a_field_loses_confidence_by_its_own_problems() -> None:
    signals = Signals(
        doc_type="act",
        model_confidence=0.8,
        problems=(FieldProblem("amount", "implausible"), FieldProblem("date", "required")),
        border_fields=("amount",),
    )
    fields = score(signals, (*FIELDS, "title")).fields
    assert fields == {"date": 0.0, "amount": pytest.approx(0.2), "title": pytest.approx(0.8)}


def test_values_are_checked_against_type_format_enum_and_plausibility() -> None:
    specs = {
        "date": FieldSpec(format="date"),
        "amount": FieldSpec(type="number"),
        "currency": FieldSpec(enum=("EUR", "USD")),
    }
    assert check_values({"date": "2026-03-01", "amount": 12.5, "currency": "EUR"}, specs) == []
    problems = check_values(
        {"date": "1 March", "amount": "twelve", "currency": "XXX"}, specs, required=("number",)
    )
    assert {(p.name, p.kind) for p in problems} == {
        ("number", "required"),
        ("date", "format"),
        ("amount", "type"),
        ("currency", "enum"),
    }
    odd = check_values({"date": "1812-06-24", "amount": -5.0}, specs)
    assert {(p.name, p.kind) for p in odd} == {("date", "implausible"), ("amount", "implausible")}
    assert check_values({"date": "2026-02-30"}, specs)[0].kind == "format"


def test_the_class_threshold_wins_over_the_default() -> None:
    per_class = {"invoice": 0.9, "letter": None}
    assert threshold_for("invoice", per_class, 0.6) == 0.9
    assert threshold_for("letter", per_class, 0.6) == 0.6
    assert threshold_for("act", per_class, 0.6) == 0.6
    assert score(Signals(doc_type="invoice", model_confidence=0.8), ()).below(0.9)
