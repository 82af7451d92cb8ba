"""Evaluate: the documents found in each bundle against the sample corpus's ``truth.json``.

Definitions (pages are 1-based):

- A *boundary* is the first page of a document, except a bundle's first page: every bundle starts
  a document there, so counting it would only flatter the scores. A bundle of one document has no
  boundaries. Precision, recall and F1 are micro-averaged over all boundaries of all bundles; with
  no boundary expected and none found they are 1.0, with none on one side only they are 0.0.
- An *over-split* is an expected document that a found document starts inside (after its first
  page); an *under-split* is a found document that an expected document starts inside.
- A document is *exact* when a found one has the same first and last page. ``type_accuracy`` is
  the share of exact documents whose type is right (0.0 when no document is exact).
- ``field_accuracy`` is the share of the declared fields (title, date, number, counterparty, amount,
  currency, reference) the truth gives for exact documents whose found value is the same (text
  compared ignoring case and spaces, amounts to the cent); a field the truth gives as null counts
  only when something was found for it. 0.0 when no field was compared.
- A bundle of the truth with nothing found counts in full as missed; found bundles that the truth
  does not know are listed and otherwise ignored.

With ``ignore_blank_pages`` a blank page at either end of a document counts for nothing, so a blank
separator filed with the next document instead of the previous one is not an error.

Per class: boundary precision/recall/F1 (a boundary counts for the class of the document it
starts: the expected one's for recall, the found one's for precision) and type accuracy. Per field:
over the exact documents whose truth gives the field (``fields`` in ``truth.json``), the share whose
found value (``values``) is the same after normalising by type: dates ISO, numbers to the cent,
text with case and spaces folded, lists item by item.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from raybatch.evaluate_fields import by_class, by_field, normalized


@dataclass(frozen=True)
class Span:
    """One document reduced to what is scored: its pages, its type and its field values."""

    first: int
    last: int
    type: str
    values: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)


def evaluate(
    truth: Mapping[str, Any] | Any, found: Mapping[str, Sequence[Any]], *, ignore_blank_pages: bool = False
) -> dict[str, Any]:
    """Boundary precision/recall/F1, over- and under-splits, type accuracy, and per-bundle details.

    ``found`` maps a bundle's file name (or a path ending in it) to its documents: objects or dicts
    with ``first_page``, ``last_page`` and ``doc_type`` or ``type``.
    """
    data = truth.model_dump(mode="json") if hasattr(truth, "model_dump") else truth
    by_name = _by_file_name(found)
    bundles = {}
    for bundle in data["bundles"]:
        name = PurePosixPath(bundle["file"]).name
        blanks = _blank_pages(bundle) if ignore_blank_pages else frozenset()
        expected = _spans(bundle["documents"], blanks)
        got = None if name not in by_name else _spans(by_name[name], blanks)
        bundles[bundle["file"]] = _score_bundle(expected, got, _first_page(bundle, blanks))
    known = {PurePosixPath(bundle["file"]).name for bundle in data["bundles"]}
    return _summary(bundles, unexpected=sorted(set(by_name) - known))


def _by_file_name(found: Mapping[str, Sequence[Any]]) -> dict[str, Sequence[Any]]:
    return {PurePosixPath(str(name).replace("\\", "/")).name: docs for name, docs in found.items()}


def _blank_pages(bundle: Mapping[str, Any]) -> frozenset[int]:
    return frozenset(info["page"] for info in bundle.get("page_info", []) if info.get("blank"))


def _first_page(bundle: Mapping[str, Any], blanks: frozenset[int]) -> int:
    return next((page for page in range(1, int(bundle["pages"]) + 1) if page not in blanks), 1)


def _spans(documents: Sequence[Any], blanks: frozenset[int]) -> list[Span]:
    spans = []
    for doc in documents:
        first, last = int(_get(doc, "first_page")), int(_get(doc, "last_page"))
        kind = _get(doc, "doc_type", None) or _get(doc, "type", "")
        while first < last and first in blanks:
            first += 1
        while last > first and last in blanks:
            last -= 1
        spans.append(Span(first, last, str(kind).lower(), _values(doc)))
    return sorted(spans, key=lambda span: (span.first, span.last))


def _values(doc: Any) -> Mapping[str, Any]:
    """A found document's values, or a truth document's fields."""
    values = _get(doc, "values", None)
    if isinstance(values, Mapping) and values:
        return values
    fields = _get(doc, "fields", None)
    return (
        fields if isinstance(fields, Mapping) and not isinstance(_get(doc, "values", None), Mapping) else {}
    )


def _get(doc: Any, name: str, *default: Any) -> Any:
    if isinstance(doc, Mapping):
        return doc[name] if name in doc or not default else default[0]
    return getattr(doc, name, *default)


def _score_bundle(expected: list[Span], got: list[Span] | None, first_page: int) -> dict[str, Any]:
    found = got or []
    expected_starts = {span.first for span in expected} - {first_page}
    found_starts = {span.first for span in found} - {first_page}
    exact = {(s.first, s.last): s for s in found}
    matched = [(span, exact[span.first, span.last]) for span in expected if (span.first, span.last) in exact]
    return {
        "missing": got is None,
        "documents_expected": len(expected),
        "documents_found": len(found),
        "documents_exact": len(matched),
        "types_right": sum(1 for want, have in matched if want.type == have.type),
        "boundaries_expected": len(expected_starts),
        "boundaries_found": len(found_starts),
        "boundaries_matched": len(expected_starts & found_starts),
        "false_boundaries": sorted(found_starts - expected_starts),
        "missed_boundaries": sorted(expected_starts - found_starts),
        "over_splits": _split_inside(expected, found_starts),
        "under_splits": _split_inside(found, expected_starts),
        "type_errors": [
            {"first_page": want.first, "last_page": want.last, "expected": want.type, "found": have.type}
            for want, have in matched
            if want.type != have.type
        ],
        "starts": {
            "expected": {span.first: span.type for span in expected if span.first != first_page},
            "found": {span.first: span.type for span in found if span.first != first_page},
        },
        "field_checks": [
            (name, normalized(value) == normalized(have.values.get(name)))
            for want, have in matched
            for name, value in want.values.items()
        ],
        "matched_types": [(want.type, want.type == have.type) for want, have in matched],
        **_field_scores(matched),
    }


def _field_scores(matched: list[tuple[Span, Span]]) -> dict[str, Any]:
    compared, errors = 0, []
    for want, have in matched:
        found = dict(have.values)
        for name, value in want.values.items():
            if value is None and found.get(name) is None:
                continue
            compared += 1
            if not _same_value(value, found.get(name)):
                errors.append(
                    {"first_page": want.first, "field": name, "expected": value, "found": found.get(name)}
                )
    return {"fields_compared": compared, "fields_right": compared - len(errors), "field_errors": errors}


def _same_value(want: Any, have: Any) -> bool:
    if isinstance(want, int | float) and isinstance(have, int | float):
        return abs(float(want) - float(have)) < 0.005
    return " ".join(str(want).lower().split()) == " ".join(str(have).lower().split())


def _split_inside(spans: Sequence[Span], starts: set[int]) -> int:
    """How many spans another side's document starts inside of (after their first page)."""
    return sum(1 for span in spans if any(span.first < start <= span.last for start in starts))


def _summary(bundles: dict[str, dict[str, Any]], *, unexpected: list[str]) -> dict[str, Any]:
    def total(key: str) -> int:
        return sum(int(detail[key]) for detail in bundles.values())

    matched, expected = total("boundaries_matched"), total("boundaries_expected")
    found = total("boundaries_found")
    precision = matched / found if found else (1.0 if not expected else 0.0)
    recall = matched / expected if expected else (1.0 if not found else 0.0)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    exact = total("documents_exact")
    return {
        "boundary_precision": round(precision, 6),
        "boundary_recall": round(recall, 6),
        "boundary_f1": round(f1, 6),
        "boundaries_expected": expected,
        "boundaries_found": found,
        "boundaries_matched": matched,
        "over_splits": total("over_splits"),
        "under_splits": total("under_splits"),
        "type_accuracy": round(total("types_right") / exact, 6) if exact else 0.0,
        "field_accuracy": round(total("fields_right") / compared, 6)
        if (compared := total("fields_compared"))
        else 0.0,
        "documents_expected": total("documents_expected"),
        "documents_found": total("documents_found"),
        "documents_exact": exact,
        "bundles_expected": len(bundles),
        "missing_bundles": sorted(name for name, detail in bundles.items() if detail["missing"]),
        "unexpected_bundles": unexpected,
        "by_class": by_class(bundles.values()),
        **by_field(bundles.values()),
        "bundles": bundles,
    }
