"""The documents table's columns for a classes file: every field a typed column.

Common fields keep their names; a class's own fields are ``<class>_<field>`` (the file check refuses
a clash). string → string, number → float64, integer → int64, boolean → bool, array → list of its
items, object → struct of its properties; a ``format: date`` field also gets ``<column>_value``, the
same as a date. A value that is not of its type (kept as text in the database, with a problem) is
null here, text outside its format or enum stays: the ``problems`` column says why.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from raybatch.classes.model import ClassesFile, FieldSpec
from raybatch.classes.values import as_date, check_value

_SCALARS = {"string": pa.string(), "number": pa.float64(), "integer": pa.int64(), "boolean": pa.bool_()}
PROBLEM = pa.struct([pa.field("field", pa.string()), pa.field("reason", pa.string())])


def arrow_type(spec: FieldSpec) -> pa.DataType:
    """The Arrow type of a field's values."""
    if spec.type == "array" and spec.items is not None:
        return pa.list_(arrow_type(spec.items))
    if spec.type == "object":
        return pa.struct([pa.field(name, arrow_type(sub)) for name, sub in (spec.properties or {}).items()])
    return _SCALARS[spec.type]


def field_columns(classes: ClassesFile) -> Iterator[tuple[str, str | None, str, FieldSpec]]:
    """(column, class or None for a common field, field, spec) of every declared field."""
    for name, spec in classes.fields.items():
        yield name, None, name, spec
    for class_name, class_spec in classes.classes.items():
        for name, spec in class_spec.fields.items():
            yield classes.column_name(class_name, name), class_name, name, spec


def arrow_fields(classes: ClassesFile) -> Iterator[pa.Field]:
    """A column per declared field (and ``<column>_value`` after a date)."""
    for column, _, _, spec in field_columns(classes):
        yield pa.field(column, arrow_type(spec))
        if spec.format == "date":
            yield pa.field(f"{column}_value", pa.date32())


def field_cells(classes: ClassesFile, doc_type: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """A document's cells of the field columns: its class's columns filled, the others null."""
    cells: dict[str, Any] = {}
    for column, owner, name, spec in field_columns(classes):
        value = typed(spec, values.get(name)) if owner in (None, doc_type) else None
        cells[column] = value
        if spec.format == "date":
            cells[f"{column}_value"] = as_date(value)
    return cells


def typed(spec: FieldSpec, value: Any) -> Any:
    """The value as its column holds it: itself when it fits its type, else null."""
    problems: list[tuple[str, str]] = []
    checked = check_value(spec, value, "", problems)
    if not problems or (spec.type == "string" and isinstance(value, str)):
        return checked  # text out of its format or enum is still text
    return _clean(spec, checked) if isinstance(checked, list | dict) else None  # parts of it did not fit


def _clean(spec: FieldSpec, value: Any) -> Any:
    """A list or object whose parts that do not fit are null."""
    if spec.type == "array" and spec.items is not None and isinstance(value, list):
        return [typed(spec.items, item) for item in value]
    if spec.type == "object" and isinstance(value, Mapping):
        return {name: typed(sub, value.get(name)) for name, sub in (spec.properties or {}).items()}
    return None
