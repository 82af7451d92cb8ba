"""PrepareScheduler without Ray: the cap on tasks in flight, the backlog bound, failures per job."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from raybatch.actors.prepare import ChunkSummary
from raybatch.actors.scheduler import PrepareScheduler
from raybatch.errors import InvalidSource
from raybatch.ids import custom_id, sha256_bytes
from raybatch.models import CachedPage, ChunkRecord, ChunkStatus, JobRecord, JobStatus, PageText, SourceKind
from raybatch.settings import StateSettings
from raybatch.state import SqlStateStore, open_state
from raybatch.steps.chunk import ChunkPlan

REQUEST_BYTES = 1_000_000


class FakeTasks:
    """Records launches; ``finish`` completes them; ``fail`` makes a chunk raise."""

    def __init__(self) -> None:
        self.launched: list[tuple[int, int]] = []
        self.done: set[Any] = set()
        self.failing: dict[tuple[int, int], BaseException] = {}

    def load(self, job: JobRecord) -> Any:
        return ("source", job.id)

    def prepare(self, job: JobRecord, plan: ChunkPlan, source: Any) -> tuple[Any, Any]:
        self.launched.append((job.id, plan.n))
        return ("summary", job.id, plan.n, plan.first, plan.last), ("payload", job.id, plan.n)

    def wait(self, refs: list[Any], num_returns: int, timeout: float) -> tuple[list[Any], list[Any]]:
        return [r for r in refs if r in self.done], [r for r in refs if r not in self.done]

    def get(self, ref: Any) -> ChunkSummary:
        _, job_id, n, first, last = ref
        if (job_id, n) in self.failing:
            raise self.failing[job_id, n]
        record = ChunkRecord(
            job_id, n, first, last, custom_id(job_id, n), "key", ChunkStatus.PREPARED, REQUEST_BYTES
        )
        return ChunkSummary(record, 0, 0)

    def finish_all(self, scheduler: PrepareScheduler) -> None:
        self.done |= set(scheduler._in_flight)


@pytest.fixture
def state(tmp_path: Path) -> SqlStateStore:
    return open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))


def pending_job(state: SqlStateStore, n: int, pages: int) -> int:
    job, _ = state.register_job(
        sha256=sha256_bytes(str(n).encode()),
        source_uri=f"file:///{n}",
        source_name=f"{n}.pdf",
        kind=SourceKind.PDF,
        size_bytes=1000,
    )
    state.transition(job.id, [JobStatus.PENDING], JobStatus.PENDING, pages=pages)
    return job.id


def scheduler(state: SqlStateStore, tasks: FakeTasks, cap: Any, backlog: int = 10**9) -> PrepareScheduler:
    return PrepareScheduler(
        state,
        tasks,
        worker_id="t",
        max_in_flight=cap,
        max_backlog_bytes=backlog,
        lease_seconds=60,
        max_attempts=3,
        wait=tasks.wait,
        get=tasks.get,
    )


def test_the_cap_bounds_tasks_in_flight_and_may_change(state: SqlStateStore) -> None:
    job = pending_job(state, 1, pages=80)  # 10 chunks
    tasks, cap = FakeTasks(), [3]
    sched = scheduler(state, tasks, lambda: cap[0])
    sched.claim([job])
    sched.tick(0)
    assert len(tasks.launched) == 3
    cap[0] = 6  # the cluster grew
    sched.tick(0)
    assert len(tasks.launched) == 6
    ready = []
    while not sched.idle:
        tasks.finish_all(sched)
        ready += sched.tick(0)
    assert [r.job_id for r in ready] == [job]
    assert sorted(ready[0].payloads) == list(range(10))
    assert state.get_job(job).status is JobStatus.PREPARED
    assert {c.status for c in state.get_chunks(job)} == {ChunkStatus.PREPARED}


def test_the_coordinators_backlog_holds_new_launches(state: SqlStateStore) -> None:
    job = pending_job(state, 1, pages=80)
    tasks = FakeTasks()
    sched = scheduler(state, tasks, 8, backlog=4 * REQUEST_BYTES)
    sched.claim([job])
    sched.tick(10 * REQUEST_BYTES)  # the coordinator already holds more than the bound
    assert tasks.launched == []
    sched.tick(0)
    assert 1 <= len(tasks.launched) <= 4


def test_a_chunk_that_cannot_be_prepared_fails_its_job_only(state: SqlStateStore) -> None:
    bad, good = pending_job(state, 1, pages=16), pending_job(state, 2, pages=8)
    tasks = FakeTasks()
    from ray.exceptions import RayTaskError

    tasks.failing[bad, 1] = RayTaskError(
        "prepare_chunk", "traceback", InvalidSource("page 9 cannot be rendered")
    )
    sched = scheduler(state, tasks, 8)
    sched.claim([bad, good])
    ready = []
    for _ in range(5):
        sched.tick(0)
        tasks.finish_all(sched)
        ready += sched.tick(0)
    assert [r.job_id for r in ready] == [good]
    failed = state.get_job(bad)
    assert failed.status is JobStatus.FAILED
    assert "page 9 cannot be rendered" in (failed.error_message or "")
    assert failed.error_class == "InvalidSource"


def test_chunks_already_answered_are_not_prepared_again(state: SqlStateStore) -> None:
    job = pending_job(state, 1, pages=16)
    answered = ChunkRecord(job, 0, 1, 8, custom_id(job, 0), "key", ChunkStatus.SUCCEEDED, 10, answer="{}")
    state.save_chunks(job, [answered])
    tasks = FakeTasks()
    sched = scheduler(state, tasks, 8)
    sched.claim([job])
    sched.tick(0)
    assert tasks.launched == [(job, 1)]


def test_a_job_whose_prepare_keeps_dying_ends_failed_not_in_a_loop(tmp_path: Path) -> None:
    """Each claim counts an attempt in the DB; past PREPARE_MAX_ATTEMPTS the job fails."""
    from datetime import UTC, datetime, timedelta

    now = [datetime(2030, 1, 1, tzinfo=UTC)]
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 's.db'}"), now=lambda: now[0])
    job = pending_job(state, 1, pages=8)
    for attempt in (1, 2, 3):
        sched = scheduler(state, FakeTasks(), 8)  # a fresh driver after the last one died
        assert sched.claim([job]) == 1
        assert state.get_job(job).attempts == attempt
        now[0] += timedelta(seconds=61)  # the dead driver's lease runs out
    sched = scheduler(state, FakeTasks(), 8)
    sched.claim([job])
    failed = state.get_job(job)
    assert failed.status is JobStatus.FAILED
    assert failed.error_class == "AttemptsExhausted"


def test_a_worker_killed_for_memory_fails_its_job_with_the_reason(state: SqlStateStore) -> None:
    from ray.exceptions import OutOfMemoryError

    job = pending_job(state, 1, pages=8)
    tasks = FakeTasks()
    sched = scheduler(state, tasks, 8)
    sched.claim([job])
    sched.tick(0)
    tasks.failing[job, 0] = OutOfMemoryError("the task used too much memory")
    tasks.finish_all(sched)
    assert sched.tick(0) == []
    failed = state.get_job(job)
    assert failed.status is JobStatus.FAILED
    assert failed.error_class == "OutOfMemoryError"
    assert "memory" in (failed.error_message or "")


def test_ocr_read_by_a_task_is_cached_by_the_driver(state: SqlStateStore) -> None:
    job = pending_job(state, 1, pages=8)
    read = CachedPage("engine-1", PageText(3, "Счёт 3", "ocr:engine-1", 0.9, 90))

    class ReadingTasks(FakeTasks):
        def get(self, ref: Any) -> ChunkSummary:
            return replace(super().get(ref), ocr_reads=(read,))

    tasks = ReadingTasks()
    sched = scheduler(state, tasks, 8)
    sched.claim([job])
    sched.tick(0)
    tasks.finish_all(sched)
    sched.tick(0)
    assert state.get_page_text(state.get_job(job).sha256, 3, "engine-1") == read.text
