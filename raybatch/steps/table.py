"""Table: documents as rows of a Parquet table for analytics, one file per job.

Pure: records in, Parquet bytes out. The pipeline writes each job's file to
``raybatch.ids.OutputKeys.documents_table_part(job_id)``, so a rerun replaces the job's rows instead
of adding to them; readers concatenate the files. The folders are hive-style (``job_id=N``): a dataset reader
needs ``hive_partitioning()``, since inferring the partition as int32 clashes with the int64 column.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Sequence
from datetime import date
from pathlib import Path
from typing import Any, BinaryIO, TypeAlias

import pyarrow as pa
import pyarrow.parquet as pq

from raybatch.models import DOCUMENT_FIELDS, DocumentRecord, JobRecord, field_values

_ARROW_TYPES = {str: pa.string(), float: pa.float64()}


def _document_fields() -> Iterator[pa.Field]:
    """A column per declared field, as found; after ``date``, ``date_value``: the same as an ISO date."""
    for spec in DOCUMENT_FIELDS:
        yield pa.field(spec.name, _ARROW_TYPES[spec.kind])
        if spec.name == "date":
            yield pa.field("date_value", pa.date32())


def _review_fields() -> Iterator[pa.Field]:
    """The document's version, score and review state (raybatch.review); older files read as nulls."""
    yield pa.field("version", pa.int32())
    yield pa.field("confidence", pa.float64())
    yield pa.field("review", pa.string())
    yield pa.field("review_reasons", pa.list_(pa.string()))


SCHEMA = pa.schema(
    [
        pa.field("job_id", pa.int64(), nullable=False),
        pa.field("index", pa.int32(), nullable=False),
        pa.field("sha256", pa.string()),
        pa.field("source_name", pa.string()),
        pa.field("first_page", pa.int32(), nullable=False),
        pa.field("last_page", pa.int32(), nullable=False),
        pa.field("pages", pa.int32(), nullable=False),
        pa.field("doc_type", pa.string(), nullable=False),
        *_document_fields(),
        pa.field("group_key", pa.string()),
        pa.field("pdf_key", pa.string()),
        pa.field("thumb_key", pa.string()),
        pa.field("fields", pa.map_(pa.string(), pa.string())),
        *_review_fields(),
    ]
)


def hive_partitioning() -> Any:
    """The partitioning of the per-job folders, for ``pyarrow.dataset`` readers (imported here: the
    writers, which only write, never load it)."""
    import pyarrow.dataset as ds

    return ds.partitioning(pa.schema([pa.field("job_id", pa.int64())]), flavor="hive")


TableSource: TypeAlias = str | Path | bytes | pa.Buffer | BinaryIO


def documents_table(documents: Sequence[DocumentRecord], job: JobRecord | None = None) -> bytes:
    """One job's documents as Parquet bytes, rows in index order; ``job`` adds its hash and name."""
    if job is not None and any(doc.job_id != job.id for doc in documents):
        raise ValueError("every document must belong to the job given")
    rows = [_row(doc, job) for doc in sorted(documents, key=lambda doc: (doc.job_id, doc.index))]
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd")
    return out.getvalue()


def read_documents_table(sources: TableSource | Iterable[TableSource]) -> pa.Table:
    """The rows of many per-job files (paths, folders searched for ``*.parquet``, bytes or buffers)."""
    tables = [_conform(pq.ParquetFile(_readable(item)).read()) for item in _expand(sources)]
    return pa.concat_tables(tables) if tables else SCHEMA.empty_table()


def _row(doc: DocumentRecord, job: JobRecord | None) -> dict[str, Any]:
    return {
        "job_id": doc.job_id,
        "index": doc.index,
        "sha256": job.sha256 if job else None,
        "source_name": job.source_name if job else None,
        "first_page": doc.first_page,
        "last_page": doc.last_page,
        "pages": doc.last_page - doc.first_page + 1,
        "doc_type": str(doc.doc_type),
        **field_values(doc),
        "date_value": _iso_date(doc.date),
        "group_key": doc.group_key,
        "pdf_key": doc.pdf_key,
        "thumb_key": doc.thumb_key,
        "fields": sorted(doc.fields.items()),
        "version": doc.version,
        "confidence": doc.confidence,
        "review": doc.review,
        "review_reasons": list(doc.review_reasons),
    }


def _iso_date(value: str | None) -> date | None:
    try:
        return date.fromisoformat(value.strip()) if value else None
    except ValueError:
        return None


def _expand(sources: TableSource | Iterable[TableSource]) -> list[TableSource]:
    single = isinstance(sources, str | Path | bytes | pa.Buffer) or hasattr(sources, "read")
    items = [sources] if single else list(sources)  # type: ignore[arg-type]
    expanded: list[TableSource] = []
    for item in items:
        if isinstance(item, str | Path) and Path(item).is_dir():
            expanded.extend(sorted(Path(item).rglob("*.parquet")))
        else:
            expanded.append(item)
    return expanded


def _readable(item: TableSource) -> Any:
    if isinstance(item, bytes):
        return pa.BufferReader(item)
    if isinstance(item, pa.Buffer):
        return pa.BufferReader(item)
    return str(item) if isinstance(item, Path) else item


def _conform(table: pa.Table) -> pa.Table:
    """Columns in the schema's order and types; a column an older file lacks comes back empty."""
    columns = [
        table.column(field.name).cast(field.type)
        if field.name in table.column_names
        else pa.nulls(table.num_rows, field.type)
        for field in SCHEMA
    ]
    return pa.Table.from_arrays(columns, schema=SCHEMA)
