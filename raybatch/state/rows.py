"""Rows of the state tables to the records that cross layers, and back."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

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


def job_record(row: Row[Any]) -> JobRecord:
    """A jobs row as a JobRecord."""
    return JobRecord(
        id=row.id,
        sha256=row.sha256,
        source_uri=row.source_uri,
        source_name=row.source_name,
        kind=SourceKind(row.kind),
        size_bytes=row.size_bytes,
        status=JobStatus(row.status),
        mode=ProcessingMode(row.mode),
        priority=Priority(row.priority),
        pages=row.pages,
        progress=float(row.progress),
        attempts=row.attempts,
        error_class=row.error_class,
        error_message=row.error_message,
        created_at=row.created_at,
        updated_at=row.updated_at,
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
    values = {name: getattr(row, name) for name in CHUNK_COLUMNS}
    values["status"] = ChunkStatus(row.status)
    values["sent_mode"] = ProcessingMode(row.sent_mode) if row.sent_mode else None
    values["rotations"] = {int(page): int(deg) for page, deg in (row.rotations or {}).items()}
    values["emulated"] = bool(row.emulated)
    return ChunkRecord(job_id=row.job_id, n=row.n, **values)


def batch_record(row: Row[Any]) -> BatchRecord:
    """A batches row as a BatchRecord."""
    return BatchRecord(
        id=row.id,
        anthropic_id=row.anthropic_id,
        status=BatchStatus(row.status),
        request_count=row.request_count,
        request_bytes=row.request_bytes,
        created_at=row.created_at,
        ended_at=row.ended_at,
        counts=dict(row.counts) if row.counts is not None else None,
    )


DOCUMENT_COLUMNS = _columns(DocumentRecord, "job_id", "index")  # the index is stored as doc_index


def document_values(document: DocumentRecord) -> dict[str, Any]:
    """The columns of a documents row for ``document`` (without job_id, index and times)."""
    values = {name: getattr(document, name) for name in DOCUMENT_COLUMNS}
    values["fields"] = dict(document.fields)
    values["extra"] = dict(document.extra)
    return values


def document_record(row: Row[Any]) -> DocumentRecord:
    """A documents row as a DocumentRecord."""
    values = {name: getattr(row, name) for name in DOCUMENT_COLUMNS}
    return DocumentRecord(job_id=row.job_id, index=row.doc_index, **values)


def error_record(row: Row[Any]) -> ErrorRecord:
    """An errors row as an ErrorRecord."""
    return ErrorRecord(
        job_id=row.job_id,
        phase=row.phase,
        error_class=row.error_class,
        message=row.message,
        created_at=row.created_at,
    )


def page_text(row: Row[Any]) -> PageText:
    """A page_ocr row as PageText."""
    return PageText(
        page=row.page,
        text=row.text,
        origin=row.origin,
        confidence=row.confidence,
        rotation=row.rotation,
    )
