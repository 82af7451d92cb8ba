"""Confidence: a document's signals in, a score in [0, 1], its reasons and per-field confidences out.

Pure and on plain values, so the same rule serves today's fields and a classes file's. The score is
a product of factors, one per doubt, each said as a reason ``<code>: <detail>``:

    model        the model's own confidence (asked for in the answer)      × that confidence
    ocr          the lowest OCR word confidence of the document's pages    × lowest / 0.9, under 0.9
    required     a required field missing                                  × 0.7
    type/format/enum  a value not of its field's type, format or enum      × 0.7
    implausible  a date or amount that cannot be right                     × 0.7
    border       continuation flags that disagree, merged parts that conflict  × 0.75
    repaired     the answer was not valid JSON and was repaired            × 0.9
    other        the class ``other``                                       × 0.6

A field's confidence is the model's and the OCR's factors, halved by each problem of that field
(a missing one is 0). A document is due for review when its score is below its class's threshold
(``review_below``) or the default (``REVIEW_BELOW``); a threshold of 1 sends every document.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

OCR_GOOD = 0.9  # an OCR page read at this word confidence or better raises no doubt
FACTORS = {
    "required": 0.7,
    "type": 0.7,
    "format": 0.7,
    "enum": 0.7,
    "implausible": 0.7,
    "border": 0.75,
    "repaired": 0.9,
    "other": 0.6,
}
REASON_CODES = ("model", "ocr", *FACTORS)
OLDEST_DATE = date(1900, 1, 1)
LARGEST_AMOUNT = 1e12
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class FieldProblem:
    """One field's value that does not validate: ``kind`` is required, type, format, enum or implausible."""

    name: str
    kind: str
    detail: str = ""

    @property
    def reason(self) -> str:
        return f"{self.kind}: {self.name}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class FieldSpec:
    """What a field's value must be, as a JSON Schema property says it: type, format, enum."""

    type: str = "string"  # string, number, integer, boolean
    format: str | None = None  # date (ISO yyyy-mm-dd), or None
    enum: tuple[str, ...] = ()


@dataclass(frozen=True)
class Signals:
    """What is known about one document that bears on how sure it is."""

    doc_type: str
    model_confidence: float | None = None
    ocr_confidences: Sequence[float] = ()  # one per OCR-read page; text-layer pages are not doubted
    problems: Sequence[FieldProblem] = ()
    border: Sequence[str] = ()  # what disagreed at the chunk borders this document crosses
    border_fields: Sequence[str] = ()  # the fields whose merged parts conflicted
    repaired: bool = False


@dataclass(frozen=True)
class Confidence:
    """A document's score in [0, 1], its reasons (``code: detail``) and each field's confidence."""

    score: float
    reasons: tuple[str, ...] = ()
    fields: Mapping[str, float] = field(default_factory=dict)

    def below(self, threshold: float) -> bool:
        """Whether the document is due for review at ``threshold`` (1 reviews every document)."""
        return self.score < threshold or threshold >= 1.0


def score(signals: Signals, field_names: Sequence[str]) -> Confidence:
    """The confidence of a document from its ``signals``; ``field_names`` get a confidence each."""
    factors: list[tuple[float, str]] = []
    model = _clamp(signals.model_confidence) if signals.model_confidence is not None else None
    if model is not None and model < 1.0:
        factors.append((model, f"model: {model:.2f}"))
    ocr = _ocr_factor(signals.ocr_confidences)
    if ocr < 1.0:
        factors.append((ocr, f"ocr: lowest page {min(signals.ocr_confidences):.2f}"))
    factors.extend((FACTORS.get(p.kind, 0.7), p.reason) for p in signals.problems)
    factors.extend((FACTORS["border"], f"border: {what}") for what in signals.border)
    if signals.repaired:
        factors.append((FACTORS["repaired"], "repaired: answer repaired"))
    if signals.doc_type == "other":
        factors.append((FACTORS["other"], "other: class other"))
    total = math.prod(value for value, _ in factors)
    base = (model if model is not None else 1.0) * ocr
    fields = {name: round(_field_confidence(name, base, signals), 4) for name in field_names}
    return Confidence(round(_clamp(total), 4), tuple(reason for _, reason in factors), fields)


def threshold_for(doc_type: str, per_class: Mapping[str, float | None], default: float) -> float:
    """The review threshold of a class: its own ``review_below`` when set, else ``default``."""
    own = per_class.get(doc_type)
    return default if own is None else own


def reason_code(reason: str) -> str:
    """The code a reason starts with (``ocr: lowest page 0.61`` → ``ocr``)."""
    return reason.split(":", 1)[0].strip()


def check_values(
    values: Mapping[str, Any], specs: Mapping[str, FieldSpec], required: Sequence[str] = ()
) -> list[FieldProblem]:
    """The validation problems of a document's field ``values`` against ``specs`` and ``required``."""
    problems = [FieldProblem(name, "required") for name in required if _empty(values.get(name))]
    for name, spec in specs.items():
        value = values.get(name)
        if not _empty(value):
            problems.extend(_check_one(name, value, spec))
    return problems


def _check_one(name: str, value: Any, spec: FieldSpec) -> list[FieldProblem]:
    if spec.type in ("number", "integer"):
        number = _number(value)
        if number is None:
            return [FieldProblem(name, "type", f"not a {spec.type}")]
        return [] if 0 <= number < LARGEST_AMOUNT else [FieldProblem(name, "implausible", "out of range")]
    text = str(value)
    if spec.enum and text not in spec.enum:
        return [FieldProblem(name, "enum", "not one of its values")]
    if spec.format == "date":
        return _check_date(name, text)
    return []


def _check_date(name: str, text: str) -> list[FieldProblem]:
    try:
        day = date.fromisoformat(text) if _ISO_DATE.match(text) else None
    except ValueError:
        day = None
    if day is None:
        return [FieldProblem(name, "format", "not an ISO date")]
    if not OLDEST_DATE <= day <= date.today().replace(year=date.today().year + 5):
        return [FieldProblem(name, "implausible", "far from today")]
    return []


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _field_confidence(name: str, base: float, signals: Signals) -> float:
    problems = [p for p in signals.problems if p.name == name]
    if any(p.kind == "required" for p in problems):
        return 0.0
    doubts = len(problems) + signals.border_fields.count(name)
    return base * 0.5**doubts


def _ocr_factor(confidences: Sequence[float]) -> float:
    if not confidences:
        return 1.0
    return min(1.0, _clamp(min(confidences)) / OCR_GOOD)


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _clamp(value: float | None) -> float:
    if value is None or not math.isfinite(value):
        return 0.0
    return min(1.0, max(0.0, value))
