"""TableSink: the documents table in the object store — a file per group write, compacted by size.

``append`` writes the rows of a group of jobs (a writer call's jobs) as one new file; ``compact``
rewrites the small and the superseded files into few, rolled by size, then deletes what they
replace. The rules (layout, which rows are current, what compacts) are ``raybatch.steps.table_files``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from raybatch.classes import ClassesFile
from raybatch.errors import LeaseLost, ObjectNotFound
from raybatch.ids import OutputKeys
from raybatch.models import JobStatus
from raybatch.objects.port import PARQUET_TYPE, ObjectStore
from raybatch.steps.table import JobRows, conform, documents_table, parquet_bytes, table_schema
from raybatch.steps.table_files import (
    FileFacts,
    current_rows,
    current_writes,
    file_facts,
    file_metadata,
    file_name,
    piece_jobs,
    plan_compaction,
    roll,
    widened,
    written_jobs,
)
from raybatch.units import MIB

GONE = frozenset({JobStatus.CANCELED})  # jobs whose outputs are removed: their rows go too
STATUS_PAGE = 1000  # job ids asked about in one statement


@dataclass(frozen=True)
class Compaction:
    """What one compaction did: the files it read and deleted, the files it wrote, the rows kept."""

    merged: int
    written: int
    rows: int
    files: int  # the table's files afterwards


class TableSink:
    """The documents table of one database in an object store."""

    def __init__(
        self,
        store: ObjectStore,
        keys: OutputKeys,
        *,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        classes: ClassesFile | None = None,
    ) -> None:
        self._store = store
        self._keys = keys
        self._classes = classes  # the table's columns (the default classes file when None)
        self.now = now

    def files(self) -> list[str]:
        """The keys of the table's files, sorted."""
        return [key for key in self._store.list(f"{self._keys.documents_table}/") if key.endswith(".parquet")]

    def append(self, jobs: Sequence[JobRows]) -> str | None:
        """Write a group of jobs' rows as one new file; its key (None for no jobs)."""
        if not jobs:
            return None
        key = self._new_key(max(rows.provenance.written_at for rows in jobs))
        data = documents_table(jobs, metadata=file_metadata(written_jobs(jobs)), classes=self._classes)
        self._store.put(key, data, content_type=PARQUET_TYPE)
        return key

    def compact(
        self,
        *,
        target_mb: float,
        gone: Callable[[list[int]], Collection[int]],
        hold: Callable[[], bool] = lambda: True,
    ) -> Compaction:
        """Rewrite the small and unclean files into files of about ``target_mb``; ``gone`` says which
        of the jobs named are no longer there (their rows are dropped). ``hold`` renews the caller's
        right to compact (one compaction at a time); once it says no, the files written go again and
        nothing is deleted: the table stays as it was."""
        target = int(target_mb * MIB)
        facts = [fact for fact in map(self._facts, self.files()) if fact is not None]
        dropped = set(gone(sorted({job_id for fact in facts for job_id in fact.jobs})))
        merge = plan_compaction(facts, target, dropped)
        if not merge:
            return Compaction(0, 0, 0, len(facts))
        current = current_writes(facts)
        schema = widened(table_schema(self._classes), merge)
        written: list[str] = []
        rows = 0
        try:
            for piece in roll(self._kept(merge, current, dropped, schema), target):
                if not hold():
                    raise LeaseLost("the documents table's compaction lease passed to another run")
                written.append(self._put_piece(piece))
                rows += piece.num_rows
            if not hold():
                raise LeaseLost("the documents table's compaction lease passed to another run")
        except BaseException:
            for key in written:  # a half compaction leaves no second copy of any row
                self._store.delete(key)
            raise
        for fact in merge:  # only once every replacement is in place
            if fact.key not in written:
                self._store.delete(fact.key)
        return Compaction(len(merge), len(written), rows, len(facts) - len(merge) + len(written))

    def _facts(self, key: str) -> FileFacts | None:
        """A file's facts; None for a file gone since the listing (a compaction that ended)."""
        try:
            return file_facts(key, self._store.get(key))
        except ObjectNotFound:
            return None

    def _kept(
        self,
        merge: Sequence[FileFacts],
        current: dict[int, tuple[datetime, str]],
        gone: Collection[int],
        schema: pa.Schema,
    ) -> Iterator[pa.Table]:
        for fact in merge:
            # One thread: a small file's read is mostly the thread pool's start otherwise.
            table = pq.ParquetFile(pa.BufferReader(self._store.get(fact.key))).read(use_threads=False)
            yield current_rows(conform(table, schema), fact.key, current, gone)

    def _put_piece(self, piece: pa.Table) -> str:
        key = self._new_key(self.now())
        metadata = file_metadata(piece_jobs(piece))
        data = parquet_bytes(piece.replace_schema_metadata(metadata))
        self._store.put(key, data, content_type=PARQUET_TYPE)
        return key

    def _new_key(self, written_at: datetime) -> str:
        return f"{self._keys.documents_table}/{file_name(written_at, uuid.uuid4().hex[:12])}"


class JobStatuses(Protocol):
    """What finding the jobs gone asks of the state store."""

    def job_statuses(self, job_ids: Iterable[int]) -> dict[int, JobStatus]:
        """The status of each job found."""
        ...


def gone_jobs(state: JobStatuses) -> Callable[[list[int]], set[int]]:
    """The jobs among those asked about that are canceled or no longer in the database."""

    def gone(job_ids: list[int]) -> set[int]:
        found: dict[int, JobStatus] = {}
        for start in range(0, len(job_ids), STATUS_PAGE):
            found.update(state.job_statuses(job_ids[start : start + STATUS_PAGE]))
        return {job_id for job_id in job_ids if found.get(job_id, JobStatus.CANCELED) in GONE}

    return gone
