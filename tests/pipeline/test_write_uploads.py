"""The writer's uploads run on while the next job is built: bounded, waited for before each job's
rows, a failed upload failing its own job alone (``raybatch.work.upload_pool``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from group_support import answered_file_job, assert_written_once
from test_write_groups import claim, state, writer  # noqa: F401 (the fixture)

from raybatch.errors import StorageRejected
from raybatch.ids import OutputKeys
from raybatch.models import JobStatus, Lease
from raybatch.objects import MemoryObjectStore, PutObject
from raybatch.state import SqlStateStore
from raybatch.work import writer as writer_module
from raybatch.work.upload_pool import Upload, UploadPool
from raybatch.work.writer import WriteReport

PATIENCE = 10.0  # seconds a test waits for what should come at once, before it fails


def _upload(job_id: int, size: int = 1) -> Upload:
    lease = Lease(job_id=job_id, worker_id="test", token=1, expires_at=datetime.now(UTC), attempt=1)
    return Upload(lease, [PutObject(f"jobs/{job_id}/o", b"x" * size)])


def test_no_more_batches_run_at_once_than_asked_and_each_jobs_failure_is_its_own() -> None:
    gate, lock = threading.Event(), threading.Lock()
    running, most, batches = [0], [0], []

    def put(batch: Sequence[Upload]) -> dict[int, Exception]:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            batches.append(sorted({one.job_id for one in batch}))
        gate.wait(PATIENCE)
        with lock:
            running[0] -= 1
        return {2: StorageRejected("refused (injected)")} if any(one.job_id == 2 for one in batch) else {}

    pool = UploadPool(put, threads=4, batch_bytes=10, batch_documents=2)
    threading.Timer(0.2, gate.set).start()  # the third batch waits for one of the first two
    for job_id in (1, 1, 2, 2, 3, 4):
        pool.add(_upload(job_id), at_once=2)
    assert most[0] == 2, "at most two batches under way"
    assert batches[:2] == [[1], [2]], "a batch is sent once it holds batch_documents"
    pool.wait(1)
    with pytest.raises(StorageRejected):
        pool.wait(2)
    pool.wait(3)  # sent with job 4's document: neither refused
    assert batches[2] == [3, 4]
    pool.add(_upload(5, size=10), at_once=4)  # full by its bytes alone: sent at once
    pool.add(_upload(6), at_once=4)
    pool.drop(6)  # failed while its batch was filling: never sent
    pool.settle_all()
    assert batches[3:] == [[5]]
    pool.wait(5)  # settled: nothing left of job 5


def test_a_batch_whose_put_raises_fails_every_job_of_it() -> None:
    def put(batch: Sequence[Upload]) -> dict[int, Exception]:
        raise StorageRejected("the store is refusing everything (injected)")

    pool = UploadPool(put)
    pool.add(_upload(1), at_once=4)
    pool.add(_upload(2), at_once=4)
    for job_id in (1, 2):
        with pytest.raises(StorageRejected):
            pool.wait(job_id)


class HeldStore(MemoryObjectStore):
    """Holds the objects of job ``held`` until an object of job ``then`` is put (so a writer that
    waited for each job's uploads before building the next would stall here); refuses those of
    job ``refused``."""

    def __init__(self, held: int, then: int, refused: int) -> None:
        super().__init__()
        self._held, self._then, self._refused = held, then, refused
        self._next_job_put = threading.Event()
        self.waited = 0.0

    def put(self, key: str, data: bytes, **kwargs: Any) -> None:
        if f"/jobs/{self._then}/" in key:
            self._next_job_put.set()
        if f"/jobs/{self._held}/documents/" in key:
            started = time.monotonic()
            assert self._next_job_put.wait(PATIENCE), "the next job was not built meanwhile"
            self.waited = time.monotonic() - started
        if f"/jobs/{self._refused}/documents/" in key:
            raise StorageRejected("object store refused the document (injected)")
        super().put(key, data, **kwargs)


def test_the_next_job_is_built_while_objects_are_put_and_a_refused_upload_fails_its_job_alone(
    state: SqlStateStore,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One document a batch, so that the first job's put runs while the next job is built.
    monkeypatch.setattr(writer_module, "UploadPool", partial(UploadPool, batch_documents=1))
    jobs = [answered_file_job(state, tmp_path, n) for n in range(4)]
    store = HeldStore(held=jobs[0], then=jobs[1], refused=jobs[2])

    reports = writer(state, store).write_group(claim(state, jobs))

    assert_refused_alone(state, store, jobs, reports, refused=jobs[2])


class CountingStore(MemoryObjectStore):
    """Counts the puts of documents' objects; refuses those of job ``refused``."""

    def __init__(self, refused: int | None = None) -> None:
        super().__init__()
        self._refused = refused
        self.document_puts: list[set[int]] = []  # the jobs of each put_many of documents

    def put_many(self, objects: Sequence[PutObject]) -> None:
        jobs = {int(o.key.split("/jobs/")[1].split("/")[0]) for o in objects if "/documents/" in o.key}
        if jobs:
            self.document_puts.append(jobs)
        if self._refused in jobs:
            raise StorageRejected("object store refused the document (injected)")
        super().put_many(objects)


def test_a_group_of_small_jobs_is_put_in_one_batch_under_one_lease_check(
    state: SqlStateStore,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    jobs = [answered_file_job(state, tmp_path, n) for n in range(6)]
    store, checks = CountingStore(), []
    holding, holds = state.holding, state.holds
    monkeypatch.setattr(state, "holding", lambda leases: checks.append(len(leases)) or holding(leases))
    monkeypatch.setattr(state, "holds", lambda lease: checks.append(1) or holds(lease))

    reports = writer(state, store).write_group(claim(state, jobs))

    assert [r.status for r in reports] == [JobStatus.COMPLETED] * 6
    assert store.document_puts == [set(jobs)], "every job's documents in one put"
    assert checks[0] == 6 and len(checks) == 3, (
        "one lease check for the batch, before the manifests and the completion"
    )
    for job_id in jobs:
        assert_written_once(state, store, job_id, documents=1)


def test_a_refused_job_in_a_batch_fails_alone_and_the_others_are_put_again_without_it(
    state: SqlStateStore,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    jobs = [answered_file_job(state, tmp_path, n) for n in range(4)]
    store = CountingStore(refused=jobs[1])

    reports = writer(state, store).write_group(claim(state, jobs))

    assert store.document_puts[0] == set(jobs), "tried together first"
    assert sorted(store.document_puts[1:], key=min) == [{job_id} for job_id in jobs], "then each job alone"
    assert_refused_alone(state, store, jobs, reports, refused=jobs[1])


def test_a_job_whose_lease_is_gone_is_not_put_and_the_rest_of_its_batch_is(
    state: SqlStateStore,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    jobs = [answered_file_job(state, tmp_path, n) for n in range(3)]
    leases = claim(state, jobs)
    taken = claim_again(state, leases[1])
    store = CountingStore()

    reports = writer(state, store).write_group(leases)

    assert [r.status for r in reports] == [JobStatus.COMPLETED, JobStatus.WRITING, JobStatus.COMPLETED]
    assert store.document_puts == [{jobs[0], jobs[2]}], "the lost job's objects never put"
    assert state.holding([taken]) == {jobs[1]}, "the job is its new holder's"


def claim_again(state: SqlStateStore, lease: Lease) -> Lease:  # noqa: F811 (not the fixture)
    """The job's lease taken over by another writer (as after the first one's lease ran out)."""
    state.transition(lease.job_id, [JobStatus.WRITING], JobStatus.ANSWERED)
    [taken] = claim(state, [lease.job_id], worker="other")
    return taken


def assert_refused_alone(
    state: SqlStateStore,  # noqa: F811 (not the fixture)
    store: MemoryObjectStore,
    jobs: list[int],
    reports: list[WriteReport],
    refused: int,
) -> None:
    failed = JobStatus.FAILED
    assert [r.status for r in reports] == [failed if j == refused else JobStatus.COMPLETED for j in jobs]
    assert "refused the document" in (state.get_job(refused).error_message or "")
    for job_id in jobs:
        if job_id != refused:
            assert_written_once(state, store, job_id, documents=1)
    keys = OutputKeys(state.database_id())
    assert not store.exists(keys.manifest(refused)), "no rows nor manifest for the refused job"
    assert state.list_documents(refused) == []
