"""Check an answer's values against their declared fields: what fits is kept as its type, what does
not is kept as text with a reason, and never fails the job.

A problem is ``(field, reason)``: ``("total", "not a number")``, ``("currency", "not one of USD,
EUR")``, ``("line_items[0].amount", "not a number")``, ``("bl_number", "required, missing")``,
``("type", "'memo' is not a class")`` (the document is then ``other``). The review work turns them
into confidence.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from raybatch.classes.model import OTHER, ClassesFile, FieldSpec

Problem = tuple[str, str]


@dataclass(frozen=True)
class CheckedValues:
    """A document's class and values after checking, and what did not fit."""

    doc_type: str
    values: dict[str, Any]
    problems: tuple[Problem, ...] = ()


def check_values(classes: ClassesFile, doc_type: str, raw: Mapping[str, Any]) -> CheckedValues:
    """``raw`` (an answer's fields) checked against the fields of class ``doc_type``."""
    problems: list[Problem] = []
    if doc_type not in classes.classes:
        problems.append(("type", f"{doc_type!r} is not a class"))
        doc_type = OTHER
    values: dict[str, Any] = {}
    for name, spec in classes.class_fields(doc_type).items():
        values[name] = check_value(spec, raw.get(name), name, problems)
    for name in classes.classes[doc_type].required:
        if values.get(name) in (None, "", []):
            problems.append((name, "required, missing"))
    return CheckedValues(doc_type, values, tuple(problems))


def check_value(spec: FieldSpec, value: Any, path: str, problems: list[Problem]) -> Any:
    """One value as its type, or as text with a problem noted; None stays None."""
    if value is None:
        return None
    checked, reason = _checked(spec, value, path, problems)
    if reason is None:
        return checked
    problems.append((path, reason))
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _checked(spec: FieldSpec, value: Any, path: str, problems: list[Problem]) -> tuple[Any, str | None]:
    if spec.type == "string":
        return _string(spec, value)
    if spec.type in ("number", "integer"):
        return _number(spec.type, value)
    if spec.type == "boolean":
        return (value, None) if isinstance(value, bool) else (None, "not true or false")
    if spec.type == "array":
        if not isinstance(value, list) or spec.items is None:
            return None, "not a list"
        return [check_value(spec.items, item, f"{path}[{i}]", problems) for i, item in enumerate(value)], None
    if not isinstance(value, Mapping):
        return None, "not an object"
    props = spec.properties or {}
    return {
        name: check_value(sub, value.get(name), f"{path}.{name}", problems) for name, sub in props.items()
    }, None


def _string(spec: FieldSpec, value: Any) -> tuple[Any, str | None]:
    if not isinstance(value, str):
        return None, "not text"
    if spec.enum is not None and value not in spec.enum:
        return None, f"not one of {', '.join(spec.enum)}"
    if spec.format == "date" and as_date(value) is None:
        return None, "not a date (yyyy-mm-dd)"
    return value, None


def _number(kind: str, value: Any) -> tuple[Any, str | None]:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None, f"not {'an integer' if kind == 'integer' else 'a number'}"
    if kind == "integer":
        return (int(value), None) if float(value).is_integer() else (None, "not an integer")
    return float(value), None


def as_date(value: Any) -> date | None:
    """An ISO ``yyyy-mm-dd`` text as a date, else None."""
    try:
        return date.fromisoformat(value.strip()) if isinstance(value, str) and value.strip() else None
    except ValueError:
        return None
