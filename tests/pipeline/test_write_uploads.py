"""The writer's uploads run on while the next job is built: bounded, waited for before each job's
rows, a failed upload failing its own job alone (``raybatch.work.upload_pool``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from group_support import answered_file_job, assert_written_once
from test_write_groups import claim, state, writer  # noqa: F401 (the fixture)

from raybatch.errors import StorageRejected
from raybatch.ids import OutputKeys
from raybatch.models import JobStatus
from raybatch.objects import MemoryObjectStore
from raybatch.state import SqlStateStore
from raybatch.work.upload_pool import UploadPool

PATIENCE = 10.0  # seconds a test waits for what should come at once, before it fails


def test_no_more_uploads_run_at_once_than_asked_and_each_jobs_failure_is_its_own() -> None:
    pool, gate, lock = UploadPool(threads=4), threading.Event(), threading.Lock()
    running, most = [0], [0]

    def upload(fail: bool) -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        gate.wait(PATIENCE)
        with lock:
            running[0] -= 1
        if fail:
            raise StorageRejected("refused (injected)")

    threading.Timer(0.2, gate.set).start()  # the third submit waits for one of the first two
    for job_id in (1, 1, 2, 2):
        pool.submit(job_id, 2, upload, job_id == 2)
    assert most[0] == 2, "at most two documents built and not yet uploaded"
    pool.wait(1)
    with pytest.raises(StorageRejected):
        pool.wait(2)
    pool.submit(3, 4, upload, True)
    pool.settle_all()  # a failure nobody waited for is dropped, not raised
    pool.wait(3)  # settled: nothing left of job 3


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
) -> None:
    jobs = [answered_file_job(state, tmp_path, n) for n in range(4)]
    store = HeldStore(held=jobs[0], then=jobs[1], refused=jobs[2])

    reports = writer(state, store).write_group(claim(state, jobs))

    assert [r.status for r in reports] == [
        JobStatus.COMPLETED,
        JobStatus.COMPLETED,
        JobStatus.FAILED,
        JobStatus.COMPLETED,
    ]
    assert "refused the document" in (state.get_job(jobs[2]).error_message or "")
    for job_id in (jobs[0], jobs[1], jobs[3]):
        assert_written_once(state, store, job_id, documents=1)
    keys = OutputKeys(state.database_id())
    assert not store.exists(keys.manifest(jobs[2])), "no rows nor manifest for the refused job"
    assert state.list_documents(jobs[2]) == []
