"""``raybatch eval`` per class and per field: the scores ``evaluate`` adds to its summary."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import date
from typing import Any


def normalized(value: Any) -> Any:
    """A value as it is compared: dates ISO, numbers to the cent, text with case and spaces folded."""
    if value is None or value == "" or value == []:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return round(float(value), 2) if math.isfinite(value) else None
    if isinstance(value, list | tuple):
        return [normalized(item) for item in value]
    if isinstance(value, Mapping):
        return {key: normalized(item) for key, item in value.items()}
    text = " ".join(str(value).split()).casefold()
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        pass
    try:
        return round(float(text.replace(",", "")), 2)
    except ValueError:
        return text


def by_class(bundles: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float | int]]:
    """Boundary P/R/F1 and type accuracy of each class, over every bundle."""
    counts: dict[str, dict[str, int]] = {}

    def count(kind: str, key: str) -> None:
        empty = {"expected": 0, "found": 0, "matched": 0, "found_matched": 0, "exact": 0, "right": 0}
        counts.setdefault(kind, empty)[key] += 1

    for detail in bundles:
        expected, found = detail["starts"]["expected"], detail["starts"]["found"]
        for page, kind in expected.items():
            count(kind, "expected")
            if page in found:
                count(kind, "matched")
        for page, kind in found.items():
            count(kind, "found")
            if page in expected:
                count(kind, "found_matched")
        for kind, right in detail["matched_types"]:
            count(kind, "exact")
            if right:
                count(kind, "right")
    return {kind: _scores(c) for kind, c in sorted(counts.items())}


def _scores(c: Mapping[str, int]) -> dict[str, float | int]:
    precision = c["found_matched"] / c["found"] if c["found"] else (1.0 if not c["expected"] else 0.0)
    recall = c["matched"] / c["expected"] if c["expected"] else (1.0 if not c["found"] else 0.0)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "boundary_precision": round(precision, 6),
        "boundary_recall": round(recall, 6),
        "boundary_f1": round(f1, 6),
        "boundaries_expected": c["expected"],
        "documents_exact": c["exact"],
        "type_accuracy": round(c["right"] / c["exact"], 6) if c["exact"] else 0.0,
    }


def by_field(bundles: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Accuracy of each field over the exact documents whose truth gives it, and over all fields."""
    tally: dict[str, list[int]] = {}
    for detail in bundles:
        for name, right in detail["field_checks"]:
            tally.setdefault(name, [0, 0])
            tally[name][0] += int(right)
            tally[name][1] += 1
    right, checked = sum(r for r, _ in tally.values()), sum(n for _, n in tally.values())
    return {
        "field_accuracy": round(right / checked, 6) if checked else None,
        "fields_checked": checked,
        "by_field": {
            name: {"accuracy": round(r / n, 6), "checked": n} for name, (r, n) in sorted(tally.items())
        },
    }
