"""Rows of the state tables to the records that cross layers, and back."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import fields
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Row

from raybatch.models import (
    BatchStatus,
    ChunkRecord,
    ChunkStatus,
    DocumentRecord,
    JobRecord,
    JobStatus,
    PageText,
    Priority,
    ProcessingMode,
    SourceKind,
)
from raybatch.state.port import BatchRecord, ErrorRecord

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")
E = TypeVar("E", bound=Enum)


def by_value(kind: type[E]) -> Callable[[Any], E]:
    """A stored value to its member by one dict lookup (``kind(value)`` goes through the metaclass:
    it shows when thousands of rows are read a second)."""
    return {member.value: member for member in kind}.__getitem__


STATUS, PRIORITY, MODE = by_value(JobStatus), by_value(Priority), by_value(ProcessingMode)


@functools.cache
def _names(record: type[Any]) -> tuple[str, ...]:
    return tuple(spec.name for spec in fields(record))


def _record(record: type[T], row: Row[Any], **converted: Any) -> T:
    """``record`` from the row's columns named as its fields; ``converted`` gives the others."""
    values = {name: getattr(row, name) for name in _names(record) if name not in converted}
    return record(**values, **converted)


def job_record(row: Row[Any]) -> JobRecord:
    """A jobs row as a JobRecord."""
    return _record(
        JobRecord,
        row,
        kind=SourceKind(row.kind),
        status=STATUS(row.status),
        mode=MODE(row.mode),
        priority=PRIORITY(row.priority),
        progress=float(row.progress),
        held_until=row.lease_expires_at,
    )


def _columns(record: type[Any], *key: str) -> tuple[str, ...]:
    """The columns a record's fields fill, besides its key: named as the fields are."""
    return tuple(spec.name for spec in fields(record) if spec.name not in key)


CHUNK_COLUMNS = _columns(ChunkRecord, "job_id", "n")


def chunk_values(chunk: ChunkRecord) -> dict[str, Any]:
    """The columns of a chunks row for ``chunk`` (without job_id, n and times)."""
    values = {name: getattr(chunk, name) for name in CHUNK_COLUMNS}
    values["status"] = ChunkStatus(chunk.status).value
    values["sent_mode"] = ProcessingMode(chunk.sent_mode).value if chunk.sent_mode else None
    values["rotations"] = {str(page): degrees for page, degrees in chunk.rotations.items()}
    return values


def chunk_record(row: Row[Any]) -> ChunkRecord:
    """A chunks row as a ChunkRecord."""
    rotations = {int(page): int(deg) for page, deg in (row.rotations or {}).items()}
    return _record(
        ChunkRecord,
        row,
        status=ChunkStatus(row.status),
        sent_mode=ProcessingMode(row.sent_mode) if row.sent_mode else None,
        rotations=rotations,
        emulated=bool(row.emulated),
    )


def batch_record(row: Row[Any]) -> BatchRecord:
    """A batches row as a BatchRecord."""
    counts = dict(row.counts) if row.counts is not None else None
    return _record(BatchRecord, row, status=BatchStatus(row.status), counts=counts)


# the index is stored as doc_index, the values as field_values
DOCUMENT_COLUMNS = tuple(
    "field_values" if name == "values" else name for name in _columns(DocumentRecord, "job_id", "index")
)


def document_values(document: DocumentRecord) -> dict[str, Any]:
    """The columns of a documents row for ``document`` (without job_id, index and times)."""
    values = {name: getattr(document, name) for name in DOCUMENT_COLUMNS if name != "field_values"}
    values["field_values"] = dict(document.values)
    values["problems"] = [list(problem) for problem in document.problems]
    values["fields"] = dict(document.fields)
    values["extra"] = dict(document.extra)
    values["review_reasons"] = list(document.review_reasons)
    values["field_confidence"] = dict(document.field_confidence)
    return values


def document_record(row: Row[Any]) -> DocumentRecord:
    """A documents row as a DocumentRecord."""
    reviewed = {
        "review_reasons": list(row.review_reasons or []),
        "field_confidence": dict(row.field_confidence or {}),
    }
    problems = tuple((str(name), str(reason)) for name, reason in row.problems or ())
    values = dict(row.field_values or {})
    return _record(DocumentRecord, row, index=row.doc_index, values=values, problems=problems, **reviewed)


def error_record(row: Row[Any]) -> ErrorRecord:
    """An errors row as an ErrorRecord."""
    return _record(ErrorRecord, row)


def page_text(row: Row[Any]) -> PageText:
    """A page_ocr row as PageText."""
    return _record(PageText, row)
