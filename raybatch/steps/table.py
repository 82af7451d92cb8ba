"""Table: documents as rows of a Parquet table for analytics, with their text and provenance.

Pure: records in, Parquet bytes out. The rows of a group of jobs go into one file
(``documents_table``); where the files lie, which rows are current and how files are compacted is
``raybatch.steps.table_files``. The field columns come from the classes file
(``raybatch.classes.columns``): typed, one per field. Every row says where it came from: the model,
the prompt version, the processing keys of its chunks (a hash of the bytes, the chunk and everything
that shaped the request), the classes file's hash, whether the emulator answered, the source and
when it was written.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, TypeAlias

import pyarrow as pa
import pyarrow.parquet as pq

from raybatch.classes import ClassesFile, default_classes
from raybatch.classes.columns import PROBLEM, arrow_fields, field_cells
from raybatch.models import ChunkRecord, DocumentRecord, JobRecord
from raybatch.units import MIB


@functools.lru_cache(maxsize=16)
def _schema_of(classes_json: str) -> pa.Schema:
    classes = ClassesFile.model_validate_json(classes_json)
    return pa.schema(
        [
            pa.field("job_id", pa.int64(), nullable=False),
            pa.field("index", pa.int32(), nullable=False),
            pa.field("sha256", pa.string()),
            pa.field("source_name", pa.string()),
            pa.field("first_page", pa.int32(), nullable=False),
            pa.field("last_page", pa.int32(), nullable=False),
            pa.field("pages", pa.int32(), nullable=False),
            pa.field("doc_type", pa.string(), nullable=False),
            *arrow_fields(classes),
            pa.field("group_key", pa.string()),
            pa.field("pdf_key", pa.string()),
            pa.field("thumb_key", pa.string()),
            pa.field("text_key", pa.string()),
            pa.field("fields", pa.map_(pa.string(), pa.string())),
            pa.field("problems", pa.list_(PROBLEM)),
            pa.field("repaired", pa.bool_()),
            # raybatch.review: the document's version, score and review state; older files read as nulls
            pa.field("version", pa.int32()),
            pa.field("confidence", pa.float64()),
            pa.field("review", pa.string()),
            pa.field("review_reasons", pa.list_(pa.string())),
            pa.field("text", pa.string()),
            # provenance
            pa.field("source_uri", pa.string()),
            pa.field("model", pa.string()),
            pa.field("prompt_version", pa.string()),
            pa.field("processing_keys", pa.list_(pa.string())),
            pa.field("classes_sha256", pa.string()),
            pa.field("emulated", pa.bool_()),
            pa.field("written_at", pa.timestamp("us", tz="UTC")),
        ]
    )


def table_schema(classes: ClassesFile | None = None) -> pa.Schema:
    """The table's schema under ``classes`` (the default file when None)."""
    return _schema_of((classes or default_classes()).model_dump_json())


SCHEMA = table_schema()  # under the default classes file
ZSTD_FROM_BYTES = MIB  # a table file this big in memory is compressed with zstd; a smaller one, snappy

TableSource: TypeAlias = str | Path | bytes | pa.Buffer | BinaryIO


@dataclass(frozen=True)
class Provenance:
    """What shaped a write's answers, and when it was written (one value for all its rows)."""

    written_at: datetime
    model: str | None = None
    prompt_version: str | None = None
    classes_sha256: str | None = None  # the classes file's hash


@dataclass(frozen=True)
class JobRows:
    """One job's documents as written once: the job, its documents, the chunks they came from,
    each document's text by index, and the write's provenance."""

    job: JobRecord
    documents: Sequence[DocumentRecord]
    provenance: Provenance
    chunks: Sequence[ChunkRecord] = ()
    texts: Mapping[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if any(doc.job_id != self.job.id for doc in self.documents):
            raise ValueError("every document must belong to the job given")


def documents_table(
    jobs: Sequence[JobRows], metadata: Mapping[bytes, bytes] | None = None, classes: ClassesFile | None = None
) -> bytes:
    """The rows of a group of jobs as Parquet bytes, in (job, index) order; ``metadata`` goes into
    the file's key-value metadata."""
    table = rows_table(jobs, classes)
    if metadata:
        table = table.replace_schema_metadata(dict(metadata))
    return parquet_bytes(table)


def rows_table(jobs: Sequence[JobRows], classes: ClassesFile | None = None) -> pa.Table:
    """The rows of a group of jobs as an Arrow table of the schema under ``classes``, in (job,
    index) order."""
    classes = classes or default_classes()
    rows = [
        _row(doc, rows, classes)
        for rows in sorted(jobs, key=lambda rows: rows.job.id)
        for doc in sorted(rows.documents, key=lambda doc: doc.index)
    ]
    return pa.Table.from_pylist(rows, schema=table_schema(classes))


def parquet_bytes(table: pa.Table) -> bytes:
    """A table as one Parquet file's bytes: zstd from ZSTD_FROM_BYTES of rows in memory, snappy
    below (a group's file of a few rows: zstd sets up a context for each of its columns, 2 ms to
    write such a file and 1.4 ms to read it more than snappy, and made it no smaller)."""
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd" if table.nbytes >= ZSTD_FROM_BYTES else "snappy")
    return out.getvalue()


def read_table_files(
    sources: TableSource | Iterable[TableSource], classes: ClassesFile | None = None
) -> list[tuple[pa.Table, dict[bytes, bytes]]]:
    """Each file's rows (in the schema under ``classes``) and its key-value metadata: paths, folders
    searched for ``*.parquet``, bytes, buffers or open files."""
    schema = table_schema(classes)
    read = [pq.ParquetFile(_readable(item)).read() for item in _expand(sources)]
    return [(conform(table, schema), dict(table.schema.metadata or {})) for table in read]


def _row(doc: DocumentRecord, rows: JobRows, classes: ClassesFile) -> dict[str, Any]:
    job, made = rows.job, rows.provenance
    chunks = [c for c in rows.chunks if c.first_page <= doc.last_page and c.last_page >= doc.first_page]
    return {
        "job_id": doc.job_id,
        "index": doc.index,
        "sha256": job.sha256,
        "source_name": job.source_name,
        "first_page": doc.first_page,
        "last_page": doc.last_page,
        "pages": doc.last_page - doc.first_page + 1,
        "doc_type": str(doc.doc_type),
        **field_cells(classes, str(doc.doc_type), doc.values),
        "group_key": doc.group_key,
        "pdf_key": doc.pdf_key,
        "thumb_key": doc.thumb_key,
        "text_key": doc.text_key,
        "fields": sorted(doc.fields.items()),
        "version": doc.version,
        "confidence": doc.confidence,
        "review": doc.review,
        "review_reasons": list(doc.review_reasons),
        "problems": [{"field": name, "reason": reason} for name, reason in doc.problems],
        "repaired": doc.repaired,
        "text": rows.texts.get(doc.index),
        "source_uri": job.source_uri,
        "model": made.model,
        "prompt_version": made.prompt_version,
        "processing_keys": [c.processing_key for c in sorted(chunks, key=lambda c: c.n)],
        "classes_sha256": made.classes_sha256,
        "emulated": any(c.emulated for c in chunks),
        "written_at": made.written_at,
    }


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


def conform(table: pa.Table, schema: pa.Schema = SCHEMA) -> pa.Table:
    """Columns in the schema's order and types; a column an older file lacks comes back empty."""
    if table.schema.remove_metadata().equals(schema.remove_metadata()):  # a file of this layout
        return table.replace_schema_metadata(schema.metadata)
    columns = [
        table.column(field.name).cast(field.type)
        if field.name in table.column_names
        else pa.nulls(table.num_rows, field.type)
        for field in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)
