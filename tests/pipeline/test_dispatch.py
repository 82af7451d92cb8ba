"""WriterPool admission: MB in flight never passes MAX_CONCURRENT_MB, except one oversize job alone."""

from __future__ import annotations

import random
from typing import Any

import pytest
from clock import FakeClock
from driver_support import pending_job
from ray.exceptions import ActorDiedError

from raybatch.loops.writer_pool import WriterPool, admissible
from raybatch.models import JobStatus, Lease, Priority
from raybatch.state import SqlStateStore
from raybatch.steps import deal
from raybatch.units import MIB
from raybatch.work.writer import WriteReport


class FakeWriter:
    """Stands in for a writer actor handle: ``write_group.remote`` returns a ticket the test completes."""

    def __init__(self, log: list[tuple[str, int]]) -> None:
        self.write_group = self
        self._log = log

    def remote(self, leases: list[Lease]) -> tuple[tuple[int, ...], int]:
        self._log += [("start", lease.job_id) for lease in leases]
        return (tuple(lease.job_id for lease in leases), id(self))


class Harness:
    """Drives a WriterPool with fake writers; finishes writes in a random order."""

    def __init__(self, state: SqlStateStore, writers: int, budget_mb: float) -> None:
        self.log: list[tuple[str, int]] = []
        self.done: set[Any] = set()
        self.state = state
        self.pool = WriterPool(
            [FakeWriter(self.log) for _ in range(writers)],
            state,
            budget_mb=budget_mb,
            worker_id="test",
            lease_seconds=60,
            max_attempts=3,
            wait=self._wait,
            get=self._get,
        )

    def _wait(self, refs: list[Any], num_returns: int, timeout: float) -> tuple[list[Any], list[Any]]:
        ready = [r for r in refs if r in self.done]
        return ready, [r for r in refs if r not in self.done]

    def _get(self, ref: Any) -> list[WriteReport]:
        reports = []
        for job_id in ref[0]:
            self.log.append(("end", job_id))
            self.state.transition(job_id, [JobStatus.WRITING], JobStatus.COMPLETED)
            reports.append(WriteReport(job_id, JobStatus.COMPLETED, 0, 0, 0, 1, 0))
        return reports

    def answered(self) -> list[Any]:
        return self.state.list_jobs([JobStatus.ANSWERED])


def answered_job(state: SqlStateStore, n: int, size_mb: float) -> int:
    return pending_job(state, n, size_bytes=int(size_mb * MIB), status=JobStatus.ANSWERED)


def max_in_flight(log: list[tuple[str, int]], sizes: dict[int, float]) -> list[tuple[float, int]]:
    """(MB in flight, writes in flight) after each start."""
    running: set[int] = set()
    seen = []
    for event, job_id in log:
        if event == "start":
            running.add(job_id)
            seen.append((sum(sizes[j] for j in running), len(running)))
        else:
            running.discard(job_id)
    return seen


@pytest.mark.parametrize("seed", range(5))
def test_megabytes_in_flight_stay_within_the_budget(state: SqlStateStore, seed: int) -> None:
    rng = random.Random(seed)
    sizes = {answered_job(state, n, rng.choice([1, 2, 5, 9, 14, 30])): 0.0 for n in range(30)}
    for job in state.list_jobs():
        sizes[job.id] = job.size_bytes / MIB
    harness = Harness(state, writers=4, budget_mb=20)
    while state.list_jobs([JobStatus.ANSWERED, JobStatus.WRITING]):
        harness.pool.tick(harness.answered())
        running = [r for r in list(harness.pool._running)]
        if running:
            harness.done.add(rng.choice(running))
    for megabytes, writes in max_in_flight(harness.log, sizes):
        assert megabytes <= 20 or writes == 1  # an oversize job (30 MB) only ever runs alone
    assert {j.status for j in state.list_jobs()} == {JobStatus.COMPLETED}
    assert max(w for _, w in max_in_flight(harness.log, sizes)) > 1  # the pool did run jobs side by side


def test_an_oversize_job_waits_until_nothing_runs(state: SqlStateStore) -> None:
    small, big = answered_job(state, 1, 5), answered_job(state, 2, 50)
    harness = Harness(state, writers=2, budget_mb=10)
    harness.pool.tick(harness.answered())
    assert harness.log == [("start", small)]
    harness.pool.tick(harness.answered())
    assert harness.log == [("start", small)]  # the big one waits for the small one to end
    harness.done.add(next(iter(harness.pool._running)))  # the small one's write ends
    harness.pool.tick(harness.answered())
    assert harness.log == [("start", small), ("end", small), ("start", big)]


def test_a_pool_is_short_of_writers_only_when_all_are_busy_and_the_next_job_fits_the_budget(
    state: SqlStateStore,
) -> None:
    first = answered_job(state, 1, 4)
    answered_job(state, 2, 4)  # fits beside the first
    big = answered_job(state, 3, 50)
    harness = Harness(state, writers=1, budget_mb=10)
    assert not harness.pool.short_of_writers(harness.answered())  # the writer is idle
    harness.pool.tick([j for j in harness.answered() if j.id == first])
    assert harness.pool.short_of_writers(harness.answered())  # busy, and the next job would fit
    waiting = [j for j in harness.answered() if j.id == big]
    assert not harness.pool.short_of_writers(waiting)  # another writer could not take it yet
    assert not harness.pool.short_of_writers([])  # nothing waits


class CountingClaims:
    """The state store, counting the claims made through it."""

    def __init__(self, state: SqlStateStore) -> None:
        self._state = state
        self.claims: list[list[int]] = []

    def claim_jobs(self, **kwargs: Any) -> list[Lease]:
        self.claims.append(sorted(kwargs["job_ids"]))
        return self._state.claim_jobs(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)


def test_idle_writers_are_filled_in_one_claim_and_a_job_taken_elsewhere_is_replaced(
    state: SqlStateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deal, "GROUP_JOBS", 1)  # one job a call: a lost one leaves a writer idle
    ids = [answered_job(state, n, 1) for n in range(5)]
    listed = state.list_jobs([JobStatus.ANSWERED])
    other = {"worker_id": "another driver", "lease_seconds": 60, "limit": 1, "job_ids": [ids[1]]}
    assert state.claim_jobs(from_statuses=[JobStatus.ANSWERED], to_status=JobStatus.WRITING, **other)
    harness = Harness(state, writers=3, budget_mb=20)
    counting = CountingClaims(state)
    harness.pool._state = counting  # type: ignore[assignment]

    admitted = harness.pool.admit(listed)  # read before the other driver took ids[1]

    assert admitted == [ids[0], ids[2], ids[3]]  # the lost job's writer took the next one at once
    assert counting.claims == [ids[:3], [ids[3]]]  # one claim for all idle writers, one to replace
    assert harness.pool.gone == {ids[1]}


@pytest.mark.parametrize(
    ("in_flight", "size", "running", "expected"),
    [(0, 500, 0, True), (10, 5, 1, True), (10, 11, 1, False), (0, 21, 0, True), (19, 1, 3, True)],
)
def test_admissible(in_flight: float, size: float, running: int, expected: bool) -> None:
    assert admissible(in_flight, size, 20, running) is expected


def one_writer_pool(
    state: SqlStateStore, writer: FakeWriter, *, max_attempts: int, **parts: Any
) -> WriterPool:
    """A pool of one writer and a 100 MB budget; ``parts``: its Ray stand-ins (wait, get, probe...)."""
    return WriterPool(
        [writer], state, budget_mb=100, worker_id="test", lease_seconds=60, max_attempts=max_attempts, **parts
    )


def _only_readiness(refs: list[Any], num_returns: int, timeout: float) -> tuple[list[Any], list[Any]]:
    return [r for r in refs if r == "up"], [r for r in refs if r != "up"]


def test_a_writer_whose_process_died_takes_work_again_only_once_ray_restarted_it(
    state: SqlStateStore,
) -> None:
    """A SIGKILLed writer's call fails; while Ray restarts it, a call to it would fail as well and
    cost the job another try. The job waits for the writer to answer again."""
    writer, up = FakeWriter([]), {"now": False}

    def wait(refs: list[Any], num_returns: int, timeout: float) -> tuple[list[Any], list[Any]]:
        done = [r for r in refs if r != "ready" or up["now"]]  # a write ends at once: its process died
        return done, [r for r in refs if r not in done]

    def get(ref: Any) -> None:
        if ref != "ready":
            raise ActorDiedError()

    pool = one_writer_pool(state, writer, max_attempts=3, wait=wait, get=get, probe=lambda writer: "ready")
    job = answered_job(state, 1, size_mb=1)
    assert pool.admit(state.list_jobs([JobStatus.ANSWERED])) == [job]
    assert pool.collect() == []
    assert state.get_job(job).status is JobStatus.ANSWERED, "the job goes back to be written again"
    for _ in range(3):
        pool.collect()
        assert pool.admit(state.list_jobs([JobStatus.ANSWERED])) == [], "no call while it restarts"
    up["now"] = True
    pool.collect()
    assert pool.admit(state.list_jobs([JobStatus.ANSWERED])) == [job]
    assert state.get_job(job).attempts == 2, "the death cost one try, the restart none"


def test_a_write_past_its_time_limit_restarts_its_writer_and_goes_again_then_fails(
    state: SqlStateStore,
) -> None:
    """A write that never ends (a hung upload) is stopped at WRITE_TIMEOUT: its writer is restarted,
    the job is written again within its attempts and fails ``TimeLimitExceeded`` on its last one."""
    log: list[tuple[str, int]] = []
    writer, clock, killed = FakeWriter(log), FakeClock(), []
    pool = one_writer_pool(
        state,
        writer,
        max_attempts=2,
        wait=_only_readiness,  # the writes never end; a restarted writer answers at once
        get=lambda ref: None,
        timeout=30.0,
        kill=killed.append,
        probe=lambda writer: "up",
        monotonic=clock.monotonic,
    )
    job = answered_job(state, 1, size_mb=1)
    assert pool.admit(state.list_jobs([JobStatus.ANSWERED])) == [job]
    clock.advance(29.0)
    assert pool.collect() == [] and pool.holds(job), "within its limit a write runs on"
    clock.advance(2.0)  # 31 s
    [report] = pool.collect()
    assert killed == [writer], "the hung writer is restarted"
    assert report.status is JobStatus.ANSWERED and "WRITE_TIMEOUT (30 s)" in (report.error or "")
    assert state.get_job(job).status is JobStatus.ANSWERED, "soft limit: it goes again"
    assert pool.idle_count == 0, "no work for a writer Ray is restarting"
    pool.collect()
    pool.collect()
    assert pool.idle_count == 1, "the restarted writer takes work again once it answers"
    assert pool.admit(state.list_jobs([JobStatus.ANSWERED])) == [job]
    clock.advance(31.0)  # 62 s
    [report] = pool.collect()
    failed = state.get_job(job)
    assert report.status is JobStatus.FAILED and failed.status is JobStatus.FAILED
    assert failed.error_class == "TimeLimitExceeded"
    assert "WRITE_TIMEOUT (30 s)" in (failed.error_message or "")


def calls(pool: WriterPool) -> list[list[tuple[int, float]]]:
    """The write calls in flight: each one's jobs with their MB."""
    return [
        [(lease.job_id, mb) for lease, mb in zip(r.leases, r.sizes_mb, strict=True)]
        for r in pool._running.values()
    ]


@pytest.mark.parametrize("seed", range(3))
def test_grouped_writes_keep_the_budget_and_their_bounds(state: SqlStateStore, seed: int) -> None:
    rng = random.Random(seed)
    sizes = {answered_job(state, n, rng.choice([0.1, 0.3, 0.5, 1.5, 3, 12])): 0.0 for n in range(60)}
    for job in state.list_jobs():
        sizes[job.id] = job.size_bytes / MIB
    harness = Harness(state, writers=3, budget_mb=8)
    shared = 0
    while state.list_jobs([JobStatus.ANSWERED, JobStatus.WRITING]):
        harness.pool.tick(harness.answered())
        in_flight = calls(harness.pool)
        total = sum(mb for call in in_flight for _, mb in call)
        assert total <= 8 or sum(map(len, in_flight)) == 1, "the budget counts every job of every call"
        for call in in_flight:
            assert len(call) <= deal.GROUP_JOBS
            assert len(call) == 1 or sum(mb for _, mb in call) <= deal.GROUP_MB
            shared += len(call) > 1
        if harness.pool._running:
            harness.done.add(rng.choice(list(harness.pool._running)))
    assert {j.status for j in state.list_jobs()} == {JobStatus.COMPLETED}
    assert shared, "small jobs did travel together"


def test_urgent_jobs_are_written_alone_and_first(state: SqlStateStore) -> None:
    normal = [answered_job(state, n, 0.1) for n in range(6)]
    urgent = answered_job(state, 9, 0.1)
    state.set_priority([urgent], Priority.URGENT)
    harness = Harness(state, writers=2, budget_mb=20)
    assert harness.pool.admit(harness.answered()) == [urgent, *normal[:4]]
    jobs = [[job_id for job_id, _ in call] for call in calls(harness.pool)]
    assert jobs == [[urgent], normal[:4]], "the urgent job alone; the others share out the writers"


def test_a_group_whose_writer_died_reports_what_it_ended_and_sends_the_rest_back_alone(
    state: SqlStateStore,
) -> None:
    """SIGKILL in the middle of a group: a job it had ended (a broken file, failed) stays so and is
    reported, not written again; the others go back to answered, each to be written alone next time."""
    jobs = [answered_job(state, n, 0.1) for n in range(4)]
    died = {"now": True}

    def get(ref: Any) -> list[WriteReport] | None:
        if died["now"]:
            raise ActorDiedError()
        return None if ref == "ready" else harness._get(ref)

    harness = Harness(state, writers=1, budget_mb=20)
    pool = one_writer_pool(state, FakeWriter(harness.log), max_attempts=3, wait=harness._wait, get=get)
    pool._probe = lambda writer: "ready"  # type: ignore[method-assign]
    assert pool.admit(harness.answered()) == jobs  # one call carries them all
    [ref] = pool._running
    state.transition(jobs[0], [JobStatus.WRITING], JobStatus.FAILED)  # ended before the kill
    harness.done |= {ref, "ready"}
    [report] = pool.collect()
    assert (report.job_id, report.status) == (jobs[0], JobStatus.FAILED)
    assert [state.get_job(j).status for j in jobs[1:]] == [JobStatus.ANSWERED] * 3
    died["now"] = False
    pool.collect()
    pool.collect()  # the restarted writer answers again
    assert pool.admit(harness.answered()) == [jobs[1]], "after a death in a group, each goes alone"
    assert state.get_job(jobs[0]).attempts == 1, "the ended job is not written again"


def test_a_group_has_write_timeout_for_each_of_its_jobs_and_past_it_each_goes_again_alone(
    state: SqlStateStore,
) -> None:
    log: list[tuple[str, int]] = []
    writer, clock, killed = FakeWriter(log), FakeClock(), []
    pool = one_writer_pool(
        state,
        writer,
        max_attempts=3,
        wait=_only_readiness,
        get=lambda ref: None,
        timeout=30.0,
        kill=killed.append,
        probe=lambda writer: "up",
        monotonic=clock.monotonic,
    )
    jobs = [answered_job(state, n, size_mb=0.1) for n in range(3)]
    assert pool.admit(state.list_jobs([JobStatus.ANSWERED])) == jobs, "one call carries the three"
    clock.advance(89.0)
    assert pool.collect() == [] and all(map(pool.holds, jobs)), "three jobs: three times the limit"
    clock.advance(2.0)  # 91 s
    reports = pool.collect()
    assert killed == [writer] and [r.job_id for r in reports] == jobs
    assert {state.get_job(j).status for j in jobs} == {JobStatus.ANSWERED}
    pool.collect()
    pool.collect()
    assert pool.admit(state.list_jobs([JobStatus.ANSWERED])) == [jobs[0]], "each goes alone now"


@pytest.mark.parametrize(("first_done", "coalesced"), [("prepare", True), ("write", False)])
def test_the_step_waits_for_work_ending_with_the_first_but_not_after_a_write_ended(
    monkeypatch: pytest.MonkeyPatch, first_done: str, coalesced: bool
) -> None:
    """A prepare task's end waits COALESCE_SECONDS for others to handle them in one step; a write
    call's does not: its writer waits idle until the step hands it the next group."""
    from raybatch import pipeline

    waits: list[tuple[list[str], float]] = []

    def ray_wait(refs: list[str], num_returns: int, timeout: float) -> tuple[list[str], list[str]]:
        waits.append((refs, timeout))
        return ([first_done], [r for r in refs if r != first_done]) if len(waits) == 1 else ([], refs)

    monkeypatch.setattr(pipeline.ray, "wait", ray_wait)
    pipeline.wait_any(["prepare", "write", "snapshot"], 0.5, prompt=["write"])

    rest = [r for r in ["prepare", "write", "snapshot"] if r != first_done]
    assert waits[0] == (["prepare", "write", "snapshot"], 0.5)
    assert waits[1:] == ([(rest, pipeline.COALESCE_SECONDS)] if coalesced else [])
