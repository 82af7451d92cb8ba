"""Table: documents as rows of a Parquet table for analytics, one file per job.

Pure: records in, Parquet bytes out. The pipeline writes each job's file to
``raybatch.ids.OutputKeys.documents_table_part(job_id)``, so a rerun replaces the job's rows instead
of adding to them; readers concatenate the files (``pyarrow.parquet.read_table(dir)``,
``pandas.read_parquet(dir)``, DuckDB's ``read_parquet('dir/*.parquet')`` all read the folder). The
field columns come from the classes file (``raybatch.classes.columns``): typed, one per field.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, TypeAlias

import pyarrow as pa
import pyarrow.parquet as pq

from raybatch.classes import ClassesFile, default_classes
from raybatch.classes.columns import PROBLEM, arrow_fields, field_cells
from raybatch.models import DocumentRecord, JobRecord


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
            pa.field("fields", pa.map_(pa.string(), pa.string())),
            pa.field("problems", pa.list_(PROBLEM)),
            pa.field("repaired", pa.bool_()),
            # raybatch.review: the document's version, score and review state; older files read as nulls
            pa.field("version", pa.int32()),
            pa.field("confidence", pa.float64()),
            pa.field("review", pa.string()),
            pa.field("review_reasons", pa.list_(pa.string())),
        ]
    )


def table_schema(classes: ClassesFile | None = None) -> pa.Schema:
    """The table's schema under ``classes`` (the default file when None)."""
    return _schema_of((classes or default_classes()).model_dump_json())


SCHEMA = table_schema()  # under the default classes file


TableSource: TypeAlias = str | Path | bytes | pa.Buffer | BinaryIO


def documents_table(
    documents: Sequence[DocumentRecord], job: JobRecord | None = None, classes: ClassesFile | None = None
) -> bytes:
    """One job's documents as Parquet bytes, rows in index order; ``job`` adds its hash and name."""
    if job is not None and any(doc.job_id != job.id for doc in documents):
        raise ValueError("every document must belong to the job given")
    classes = classes or default_classes()
    rows = [_row(doc, job, classes) for doc in sorted(documents, key=lambda doc: (doc.job_id, doc.index))]
    table = pa.Table.from_pylist(rows, schema=table_schema(classes))
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd")
    return out.getvalue()


def read_documents_table(
    sources: TableSource | Iterable[TableSource], classes: ClassesFile | None = None
) -> pa.Table:
    """The rows of many per-job files (paths, folders searched for ``*.parquet``, bytes or buffers)."""
    schema = table_schema(classes)
    tables = [_conform(pq.ParquetFile(_readable(item)).read(), schema) for item in _expand(sources)]
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _row(doc: DocumentRecord, job: JobRecord | None, classes: ClassesFile) -> dict[str, Any]:
    return {
        "job_id": doc.job_id,
        "index": doc.index,
        "sha256": job.sha256 if job else None,
        "source_name": job.source_name if job else None,
        "first_page": doc.first_page,
        "last_page": doc.last_page,
        "pages": doc.last_page - doc.first_page + 1,
        "doc_type": str(doc.doc_type),
        **field_cells(classes, str(doc.doc_type), doc.values),
        "group_key": doc.group_key,
        "pdf_key": doc.pdf_key,
        "thumb_key": doc.thumb_key,
        "fields": sorted(doc.fields.items()),
        "version": doc.version,
        "confidence": doc.confidence,
        "review": doc.review,
        "review_reasons": list(doc.review_reasons),
        "problems": [{"field": name, "reason": reason} for name, reason in doc.problems],
        "repaired": doc.repaired,
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


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Columns in the schema's order and types; a column an older file lacks comes back empty."""
    columns = [
        table.column(field.name).cast(field.type)
        if field.name in table.column_names
        else pa.nulls(table.num_rows, field.type)
        for field in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)
