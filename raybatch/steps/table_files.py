"""Table files: how the documents table lies in the store, which rows are current, what compacts.

Layout: ``db-<id>/tables/documents/part-<written>-<token>.parquet``, with no partition folders, so
pyarrow, pandas, DuckDB and Spark read the folder as it is, and every column is in the files. A
write of a group of jobs appends one file; the run compacts the small ones at its end into files
of at most TABLE_FILE_MB (of rows in memory). The file count is bounded by the table's size, never
by its number of jobs.

Replacement, exactly once: every row carries its write's ``written_at``, and every file names in
its metadata (``raybatch.jobs``) the jobs it holds with their ``written_at``, a job without
documents too. A job's current rows are those of its newest write; its older rows are superseded.
Writes of one job are serialised by its lease, so they have distinct times. A file whose rows are
all current and held nowhere else is clean; compaction rewrites the small and the unclean files,
keeping the current rows once (from the first file holding them: a compaction cut off between
putting its files and deleting the old ones leaves two copies) and dropping the rows of jobs gone
(canceled). Between compactions an engine reading the folder may see a rewritten job twice;
``read_documents_table`` applies the rule at any time.

Pure: bytes and facts in, tables and plans out; ``raybatch.work.table_sink`` does the I/O.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq

from raybatch.classes import ClassesFile
from raybatch.steps.table import JobRows, TableSource, read_table_files, table_schema

JOBS_METADATA = b"raybatch.jobs"
LAYOUT_METADATA = b"raybatch.table"
LAYOUT = "documents.v1"
OLDEST = datetime(1970, 1, 1, tzinfo=UTC)  # the write time of rows from files older than this layout
SLICED_RUNS = 64  # rows in at most this many runs of (job, index) order are sorted by slicing


@dataclass(frozen=True)
class FileFacts:
    """What one table file holds: its key, its size, and its jobs with their write times."""

    key: str
    size: int
    jobs: Mapping[int, datetime]
    legacy: bool = False  # written before this layout (one file per job, no metadata)
    schema: pa.Schema | None = None  # its columns (those of the classes file it was written under)


def file_name(written_at: datetime, token: str) -> str:
    """A table file's name: its write time (sortable) and a token of its own."""
    return f"part-{written_at.astimezone(UTC):%Y%m%dT%H%M%S%fZ}-{token}.parquet"


def file_metadata(jobs: Mapping[int, datetime]) -> dict[bytes, bytes]:
    """The key-value metadata of a table file holding these jobs' writes."""
    named = {str(job_id): at.astimezone(UTC).isoformat() for job_id, at in sorted(jobs.items())}
    return {LAYOUT_METADATA: LAYOUT.encode(), JOBS_METADATA: json.dumps(named).encode()}


def written_jobs(jobs: Sequence[JobRows]) -> dict[int, datetime]:
    """The jobs of a group write and their write times."""
    return {rows.job.id: rows.provenance.written_at for rows in jobs}


def file_facts(key: str, data: bytes) -> FileFacts:
    """The facts of one file, from its footer (a file without ours: from its rows' job ids)."""
    parquet = pq.ParquetFile(pa.BufferReader(data))
    schema = parquet.schema_arrow
    jobs = _named_jobs(schema.metadata or {})
    if jobs is not None:
        return FileFacts(key, len(data), jobs, schema=schema.remove_metadata())
    job_ids = parquet.read(columns=["job_id"]).column("job_id").to_pylist()
    return FileFacts(
        key, len(data), dict.fromkeys(job_ids, OLDEST), legacy=True, schema=schema.remove_metadata()
    )


def widened(schema: pa.Schema, facts: Iterable[FileFacts]) -> pa.Schema:
    """``schema`` and, after it, every column the files hold that it lacks: a compaction under one
    classes file keeps the field columns of the files written under another."""
    fields = list(schema)
    names = set(schema.names)
    for fact in facts:
        for column in fact.schema or ():
            if column.name not in names:
                fields.append(column)
                names.add(column.name)
    return pa.schema(fields)


def current_writes(facts: Iterable[FileFacts]) -> dict[int, tuple[datetime, str]]:
    """Each job's newest write and the first file (by key) that holds it."""
    current: dict[int, tuple[datetime, str]] = {}
    for fact in sorted(facts, key=lambda f: f.key):
        for job_id, at in fact.jobs.items():
            if job_id not in current or at > current[job_id][0]:
                current[job_id] = (at, fact.key)
    return current


def is_clean(fact: FileFacts, current: Mapping[int, tuple[datetime, str]], gone: Collection[int]) -> bool:
    """Whether every row of a file is current, held by no other file, and of a job still there."""
    if fact.legacy:
        return False
    return all(job_id not in gone and current[job_id] == (at, fact.key) for job_id, at in fact.jobs.items())


def plan_compaction(facts: Sequence[FileFacts], target_bytes: int, gone: Collection[int]) -> list[FileFacts]:
    """The files to rewrite: the unclean ones and those under half the target size; none when that
    is one clean file (rewriting it gains nothing)."""
    current = current_writes(facts)
    unclean = [f for f in facts if not is_clean(f, current, gone)]
    small = [f for f in facts if f.size < target_bytes // 2 and f not in unclean]
    merge = sorted([*unclean, *small], key=lambda f: f.key)
    return [] if not unclean and len(merge) <= 1 else merge


def current_rows(
    table: pa.Table, key: str, current: Mapping[int, tuple[datetime, str]], gone: Collection[int]
) -> pa.Table:
    """The rows of file ``key`` that are current, held first by it, and of jobs still there."""
    job_ids = table.column("job_id").to_pylist()
    mine = (job_id for job_id in set(job_ids) if job_id in current and current[job_id][1] == key)
    wanted = {job_id: _micros(current[job_id][0]) for job_id in mine}  # this file's jobs only
    keep = [
        job_id not in gone and wanted.get(job_id) == at
        for job_id, at in zip(job_ids, _written(table), strict=True)
    ]
    return _rows_where(table, keep)


def _rows_where(table: pa.Table, keep: Sequence[bool]) -> pa.Table:
    """The rows whose ``keep`` is true."""
    return _rows_in(table, [i for i, kept in enumerate(keep) if kept])


def _rows_in(table: pa.Table, rows: Sequence[int]) -> pa.Table:
    """The rows numbered ``rows``, in that order, as slices of the table's consecutive runs among
    them: a mask or indices made with ``pa.array`` would import pandas (pyarrow asks whether it was
    handed a pandas object), 0.2 s in the driver, and ``take`` pyarrow.compute."""
    slices, start = [], 0
    for end in range(1, len(rows) + 1):
        if end == len(rows) or rows[end] != rows[end - 1] + 1:
            slices.append(table.slice(rows[start], end - start))
            start = end
    return pa.concat_tables(slices) if slices else table.slice(0, 0)


def roll(tables: Iterable[pa.Table], target_bytes: int) -> Iterator[pa.Table]:
    """The rows of ``tables`` in pieces of about ``target_bytes`` in memory, each in (job, index) order."""
    held: list[pa.Table] = []
    size = 0
    for table in tables:
        held.append(table)
        size += table.nbytes
        if size >= target_bytes:
            yield _sorted(pa.concat_tables(held))
            held, size = [], 0
    if held and sum(t.num_rows for t in held):
        yield _sorted(pa.concat_tables(held))


def piece_jobs(piece: pa.Table) -> dict[int, datetime]:
    """The jobs whose rows a compacted piece holds, with their write times."""
    job_ids = piece.column("job_id").to_pylist()
    return {job_id: _from_micros(at) for job_id, at in zip(job_ids, _written(piece), strict=True)}


def _written(table: pa.Table) -> list[int]:
    """Each row's write time in microseconds since 1970 (0 for rows written before this layout)."""
    # Not ``pc.fill_null(..., 0)``: making its scalar imports pandas, as ``pa.array`` does; and
    # a view of the timestamps as integers, not a ``cast``, which imports pyarrow.compute (0.1 s).
    chunks = table.column("written_at").chunks
    return [at or 0 for chunk in chunks for at in chunk.view(pa.int64()).to_pylist()]


def read_documents_table(
    sources: TableSource | Iterable[TableSource], classes: ClassesFile | None = None
) -> pa.Table:
    """The current rows of a table's files (a folder, paths, bytes, buffers), each once, in (job,
    index) order: what a compacted table holds (in the schema under ``classes``)."""
    files = read_table_files(sources, classes)
    facts = [_facts_of(f"{n:08d}", table, metadata) for n, (table, metadata) in enumerate(files)]
    current = current_writes(facts)
    kept = [current_rows(table, fact.key, current, ()) for (table, _), fact in zip(files, facts, strict=True)]
    return _sorted(pa.concat_tables(kept)) if kept else table_schema(classes).empty_table()


def _named_jobs(metadata: Mapping[bytes, bytes]) -> dict[int, datetime] | None:
    """The jobs a file's metadata names, or None for a file without ours."""
    if JOBS_METADATA not in metadata:
        return None
    named = json.loads(metadata[JOBS_METADATA])
    return {int(job_id): datetime.fromisoformat(at) for job_id, at in named.items()}


def _facts_of(key: str, table: pa.Table, metadata: Mapping[bytes, bytes]) -> FileFacts:
    jobs = _named_jobs(metadata)
    if jobs is not None:
        return FileFacts(key, table.nbytes, jobs)
    job_ids = table.column("job_id").to_pylist()
    return FileFacts(key, table.nbytes, dict.fromkeys(job_ids, OLDEST), legacy=True)


def _sorted(table: pa.Table) -> pa.Table:
    """The rows in (job, index) order. Files each hold their rows in that order, so a compaction's
    rows are a few runs of it, put together from slices; ``sort_by`` only for many runs (it imports
    pyarrow.compute: 0.1 s at a run's end, for a table of a few rows)."""
    keys = list(zip(table.column("job_id").to_pylist(), table.column("index").to_pylist(), strict=True))
    order = sorted(range(len(keys)), key=keys.__getitem__)
    runs = 1 + sum(1 for a, b in itertools.pairwise(order) if b != a + 1)
    if runs > SLICED_RUNS:
        return table.sort_by([("job_id", "ascending"), ("index", "ascending")])
    return _rows_in(table, order)


def _micros(at: datetime) -> int:
    return (at - OLDEST) // timedelta(microseconds=1)


def _from_micros(micros: int) -> datetime:
    return OLDEST + timedelta(microseconds=micros)
