"""ResultWriter.write_group without Ray: several small jobs in one call, one table file for those
written, each job under its own lease and failing alone."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from group_support import answered_file_job, assert_written_once, one_document_pdf, table_rows

from raybatch.cancel import cancel_jobs
from raybatch.errors import StorageRejected
from raybatch.ids import OutputKeys
from raybatch.models import JobStatus, Lease
from raybatch.objects import MemoryObjectStore, PutObject
from raybatch.settings import ClaudeSettings, PrepareSettings, StateSettings, StoreSettings
from raybatch.state import SqlStateStore, open_state
from raybatch.work.table_sink import TableSink
from raybatch.work.writer import ResultWriter


@pytest.fixture
def state(tmp_path: Path) -> SqlStateStore:
    return open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))


def claim(state: SqlStateStore, jobs: list[int], worker: str = "w") -> list[Lease]:
    leases = state.claim_jobs(
        worker_id=worker,
        from_statuses=[JobStatus.ANSWERED],
        to_status=JobStatus.WRITING,
        lease_seconds=60,
        limit=len(jobs),
        job_ids=jobs,
    )
    return sorted(leases, key=lambda lease: lease.job_id)


def writer(state: SqlStateStore, store: MemoryObjectStore) -> ResultWriter:
    return ResultWriter(
        state, store, sources=StoreSettings(), prepare=PrepareSettings(), claude=ClaudeSettings()
    )


def test_a_broken_file_in_a_group_fails_that_file_alone_and_the_rest_share_one_table_file(
    state: SqlStateStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = [answered_file_job(state, tmp_path, n, pages=1 + n % 2) for n in range(5)]
    one_document_pdf(tmp_path / "file_1.pdf", 99, pages=2)  # changed since it was prepared
    with sqlite3.connect(tmp_path / "state.db") as conn:  # an answer that does not parse
        conn.execute("UPDATE chunks SET answer = '{not json' WHERE job_id = ?", (jobs[3],))
    conn.close()
    store = MemoryObjectStore()
    reads: list[Any] = []
    spellings = state.group_spellings
    monkeypatch.setattr(state, "group_spellings", lambda *a: reads.append(a) or spellings(*a))

    reports = writer(state, store).write_group(claim(state, jobs))

    assert [r.job_id for r in reports] == jobs
    assert [r.status for r in reports] == [
        JobStatus.COMPLETED,
        JobStatus.FAILED,
        JobStatus.COMPLETED,
        JobStatus.FAILED,
        JobStatus.COMPLETED,
    ]
    assert [r.documents for r in reports] == [1, 0, 1, 0, 1]
    for n in (0, 2, 4):
        assert_written_once(state, store, jobs[n], documents=1 + n % 2)
    assert (state.get_job(jobs[1]).error_message or "").startswith("changed: the file's bytes are no longer")
    unparsed = state.get_job(jobs[3])
    assert unparsed.error_class == "ValidationError" and "file_3.pdf" in (unparsed.error_message or "")
    keys = OutputKeys(state.database_id())
    for n in (1, 3):
        assert list(store.list(keys.job_prefix(jobs[n]))) == [], "nothing of the broken files was written"
    assert len(list(store.list(keys.documents_table))) == 1, "one table file for the group"
    assert {r["job_id"] for r in table_rows(store, keys)} == {jobs[0], jobs[2], jobs[4]}
    assert len(reads) == 1, "the known groups are read once for the call"


class CancelingStore(MemoryObjectStore):
    """Cancels job ``victim`` (written already, not yet completed) as the next job's first object is put."""

    def __init__(self, state: SqlStateStore, victim: int, trigger: int) -> None:
        super().__init__()
        self._state, self._victim, self._trigger = state, victim, trigger

    def put(self, key: str, data: bytes, **kwargs: Any) -> None:
        keys = OutputKeys(self._state.database_id())
        if key.startswith(f"{keys.job_prefix(self._trigger)}/") and self._victim:
            assert cancel_jobs(self._state, MemoryObjectStore(), [self._victim]) == [self._victim]
            self._victim = 0
        super().put(key, data, **kwargs)


def test_each_job_of_a_group_is_fenced_by_its_own_lease(state: SqlStateStore, tmp_path: Path) -> None:
    """A job canceled after its outputs were written (before the group's table file) and a job
    whose lease another holder took stop alone: the others are written and completed."""
    jobs = [answered_file_job(state, tmp_path, n) for n in range(4)]
    leases = claim(state, jobs)
    assert state.transition(jobs[2], [JobStatus.WRITING], JobStatus.ANSWERED)  # lease lost ...
    [taken] = claim(state, [jobs[2]], worker="another driver")  # ... and taken by another holder
    store = CancelingStore(state, victim=jobs[0], trigger=jobs[1])

    reports = writer(state, store).write_group(leases)

    assert [r.status for r in reports] == [
        JobStatus.CANCELED,
        JobStatus.COMPLETED,
        JobStatus.WRITING,
        JobStatus.COMPLETED,
    ]
    keys = OutputKeys(state.database_id())
    assert list(store.list(keys.job_prefix(jobs[0]))) == [], "the canceled job's outputs are removed"
    assert state.get_job(jobs[0]).status is JobStatus.CANCELED
    assert state.holds(taken) and state.get_job(jobs[2]).status is JobStatus.WRITING, "left to its holder"
    assert list(store.list(keys.job_prefix(jobs[2]))) == []
    for job_id in (jobs[1], jobs[3]):
        assert_written_once(state, store, job_id, documents=1)
    assert {r["job_id"] for r in table_rows(store, keys)} == {jobs[1], jobs[3]}


def test_rows_that_break_the_group_table_file_fail_their_job_alone(
    state: SqlStateStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should the group's table file fail for one job's rows, each job's rows are appended alone:
    that job fails with its cause, the others are completed."""
    jobs = [answered_file_job(state, tmp_path, n) for n in range(3)]
    append = TableSink.append

    def breaks_on_job_1(sink: TableSink, rows: Any) -> str | None:
        if jobs[1] in {r.job.id for r in rows}:
            raise ValueError("a value the table cannot hold (injected)")
        return append(sink, rows)

    monkeypatch.setattr(TableSink, "append", breaks_on_job_1)
    store = MemoryObjectStore()

    reports = writer(state, store).write_group(claim(state, jobs))

    assert [r.status for r in reports] == [JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.COMPLETED]
    assert "ValueError" in (reports[1].error or "") and state.get_job(jobs[1]).error_class == "ValueError"
    for job_id in (jobs[0], jobs[2]):
        assert_written_once(state, store, job_id, documents=1)


class TakingStore(MemoryObjectStore):
    """Gives job ``victim``'s lease (its objects put already) to another holder as the next job's
    first object is put."""

    def __init__(self, state: SqlStateStore, victim: int, trigger: int) -> None:
        super().__init__()
        self._state, self._victim, self._trigger = state, victim, trigger

    def put(self, key: str, data: bytes, **kwargs: Any) -> None:
        if f"/jobs/{self._trigger}/" in key and self._victim:
            assert self._state.transition(self._victim, [JobStatus.WRITING], JobStatus.ANSWERED)
            claim(self._state, [self._victim], worker="another writer")
            self._victim = 0
        super().put(key, data, **kwargs)


def test_a_lease_lost_once_its_objects_are_put_stops_that_job_before_its_rows_and_manifest(
    state: SqlStateStore, tmp_path: Path
) -> None:
    jobs = [answered_file_job(state, tmp_path, n) for n in range(3)]
    store = TakingStore(state, victim=jobs[0], trigger=jobs[1])

    reports = writer(state, store).write_group(claim(state, jobs))

    assert [r.status for r in reports] == [JobStatus.WRITING, JobStatus.COMPLETED, JobStatus.COMPLETED]
    keys = OutputKeys(state.database_id())
    assert not store.exists(keys.manifest(jobs[0])) and state.list_documents(jobs[0]) == []
    assert state.get_job(jobs[0]).status is JobStatus.WRITING, "left to its new holder"
    for job_id in jobs[1:]:
        assert_written_once(state, store, job_id, documents=1)


class RefusingStore(MemoryObjectStore):
    """Refuses, for good, the manifest of job ``refused``; records each ``put_many``'s keys."""

    def __init__(self, refused: int) -> None:
        super().__init__()
        self._refused = refused
        self.calls: list[list[str]] = []

    def put_many(self, objects: Sequence[PutObject]) -> None:
        self.calls.append([one.key for one in objects])
        super().put_many(objects)

    def put(self, key: str, data: bytes, **kwargs: Any) -> None:
        if key.endswith(f"/jobs/{self._refused}/manifest.json"):
            raise StorageRejected("object store refused the manifest (injected)")
        super().put(key, data, **kwargs)


def test_a_manifest_refused_in_the_groups_put_fails_its_job_alone(
    state: SqlStateStore, tmp_path: Path
) -> None:
    """The group's manifests are put in one ``put_many`` (its documents' objects in one too); one
    refused for good fails that job, each manifest then put alone: the others are completed."""
    jobs = [answered_file_job(state, tmp_path, n) for n in range(3)]
    store = RefusingStore(refused=jobs[1])

    reports = writer(state, store).write_group(claim(state, jobs))

    assert [r.status for r in reports] == [JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.COMPLETED]
    assert (
        "StorageRejected" in (reports[1].error or "")
        and state.get_job(jobs[1]).error_class == "StorageRejected"
    )
    keys = OutputKeys(state.database_id())
    manifests = [keys.manifest(job_id) for job_id in jobs]
    assert manifests in store.calls, "the group's manifests are put together first"
    assert [[key] for key in manifests] == [c for c in store.calls if len(c) == 1], "then each alone"
    assert sum(len(c) == 9 and c[0].endswith(".pdf") for c in store.calls) == 1, (
        "the group's documents' objects together"
    )
    for job_id in (jobs[0], jobs[2]):
        assert_written_once(state, store, job_id, documents=1)
    assert not store.exists(keys.manifest(jobs[1]))
