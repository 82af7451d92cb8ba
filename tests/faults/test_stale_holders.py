"""A holder whose lease was taken over changes nothing: not the writer's park, not the pool's
release or timeout, not the scheduler's transient or timeout paths. Each stale holder acts after a
second holder claimed the job; the job stays the second holder's, its try count untouched."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from clock import FakeClock
from driver_support import pending_job
from ray.exceptions import ActorDiedError, RayTaskError
from test_scheduler import FakeTasks

from raybatch.errors import StorageUnavailable
from raybatch.loops.scheduler import PrepareScheduler
from raybatch.loops.writer_pool import WriterPool
from raybatch.models import JobStatus, Lease
from raybatch.settings import ClaudeSettings, PrepareSettings, StoreSettings
from raybatch.state import SqlStateStore
from raybatch.work.writer import ResultWriter, WriteReport

LEASE = 60.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def timed(db: str, clock: FakeClock) -> Iterator[SqlStateStore]:
    """A SQLite store on the test's clock, so a lease can run out."""
    store = SqlStateStore.from_url(db, now=clock)
    store.migrate()
    yield store
    store.close()


def take_over(state: SqlStateStore, clock: FakeClock, job_id: int, status: JobStatus) -> Lease:
    """The first holder's lease runs out and ``b`` claims the job in ``status``."""
    clock.advance(LEASE + 1)
    [lease] = state.claim_jobs(
        worker_id="b",
        from_statuses=[status],
        to_status=status,
        lease_seconds=LEASE,
        limit=1,
        job_ids=[job_id],
    )
    return lease


def assert_still_held(state: SqlStateStore, lease: Lease, status: JobStatus) -> None:
    job = state.get_job(lease.job_id)
    assert (job.status, job.attempts) == (status, lease.attempt), job
    assert state.holds(lease), "the new holder's lease was released by the stale one"


def claim(state: SqlStateStore, job_id: int, status: JobStatus, to: JobStatus) -> Lease:
    [lease] = state.claim_jobs(
        worker_id="a", from_statuses=[status], to_status=to, lease_seconds=LEASE, limit=1, job_ids=[job_id]
    )
    return lease


def test_the_transition_of_a_stale_holder_is_refused(timed: SqlStateStore, clock: FakeClock) -> None:
    job = pending_job(timed, 1)
    stale = claim(timed, job, JobStatus.PENDING, JobStatus.PREPARING)
    fresh = take_over(timed, clock, job, JobStatus.PREPARING)
    assert not timed.transition(job, [JobStatus.PREPARING], JobStatus.PENDING, lease=stale, attempts=0)
    assert_still_held(timed, fresh, JobStatus.PREPARING)
    assert timed.transition(job, [JobStatus.PREPARING], JobStatus.PENDING, lease=fresh)


def test_a_stale_writer_parks_nothing(
    timed: SqlStateStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = pending_job(timed, 1, status=JobStatus.ANSWERED)
    stale = claim(timed, job, JobStatus.ANSWERED, JobStatus.WRITING)
    fresh = take_over(timed, clock, job, JobStatus.WRITING)
    writer = ResultWriter(
        timed, None, sources=StoreSettings(), prepare=PrepareSettings(), claude=ClaudeSettings()
    )  # type: ignore[arg-type]

    def outage(*_: Any) -> int:
        raise StorageUnavailable("the store went away (injected)")

    monkeypatch.setattr(writer, "write_outputs", outage)
    report = writer.write(stale)
    assert report.status is JobStatus.WRITING, report
    assert_still_held(timed, fresh, JobStatus.WRITING)


class DeadWriters:
    """Writer handles whose calls never finish, or end with the writer's death."""

    def __init__(self) -> None:
        self.done: set[Any] = set()
        self.write_group = self

    def remote(self, leases: list[Lease]) -> Any:
        return ("write", *(lease.job_id for lease in leases))

    def wait(self, refs: list[Any], num_returns: int, timeout: float) -> tuple[list[Any], list[Any]]:
        return [r for r in refs if r in self.done], [r for r in refs if r not in self.done]

    def get(self, ref: Any) -> WriteReport:
        raise ActorDiedError()


def pool(state: SqlStateStore, writer: DeadWriters, clock: FakeClock) -> WriterPool:
    return WriterPool(
        [writer],
        state,
        budget_mb=100,
        worker_id="a",
        lease_seconds=LEASE,
        max_attempts=3,
        wait=writer.wait,
        get=writer.get,
        timeout=LEASE * 2,
        kill=lambda _: None,
        probe=lambda _: "probe",
        monotonic=clock.monotonic,
    )


@pytest.mark.parametrize("ending", ["the writer died", "the write ran past its limit"])
def test_a_stale_pool_releases_nothing(timed: SqlStateStore, clock: FakeClock, ending: str) -> None:
    job = pending_job(timed, 1, status=JobStatus.ANSWERED)
    writer = DeadWriters()
    writers = pool(timed, writer, clock)
    writers.tick(timed.list_jobs([JobStatus.ANSWERED]))
    assert len(writers._running) == 1
    fresh = take_over(timed, clock, job, JobStatus.WRITING)
    if ending == "the writer died":
        writer.done.add(("write", job))
    else:
        clock.advance(LEASE * 2)
    writers.collect()
    assert not writers._running
    assert_still_held(timed, fresh, JobStatus.WRITING)


@pytest.mark.parametrize("ending", ["a storage outage", "the task ran past its limit"])
def test_a_stale_scheduler_sends_nothing_back(timed: SqlStateStore, clock: FakeClock, ending: str) -> None:
    job = pending_job(timed, 1, pages=8)
    tasks = FakeTasks()
    sched = PrepareScheduler(
        timed,
        tasks,
        worker_id="a",
        max_in_flight=8,
        max_backlog_bytes=10**9,
        lease_seconds=LEASE,
        max_attempts=3,
        wait=tasks.wait,
        get=tasks.get,
        timeout=LEASE * 2,
        cancel=lambda _: None,
        monotonic=clock.monotonic,
    )
    sched.claim([job])
    sched.tick(0)
    fresh = take_over(timed, clock, job, JobStatus.PREPARING)
    if ending == "a storage outage":
        outage = StorageUnavailable("the store went away (injected)")
        tasks.failing[job, 0] = RayTaskError("prepare_chunk", "traceback", outage)
        tasks.finish_all(sched)
    else:
        clock.advance(LEASE * 2)
    sched.tick(0)
    assert not sched.holds(job)
    assert_still_held(timed, fresh, JobStatus.PREPARING)
