"""The Driver without Ray: stand-ins for the prepare tasks, the writers and the coordinator."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from clock import FakeClock
from driver_support import (
    CoordinatorState,
    StandInCoordinator,
    StandInTasks,
    StandInWriter,
    driver_parts,
    pending_job,
)
from ray.exceptions import ActorDiedError, RayActorError

from raybatch.errors import DatabaseUnavailable
from raybatch.loops import driver as driver_module
from raybatch.loops.driver import GROW_NOW_JOBS, SNAPSHOT_SECONDS, Driver
from raybatch.models import JobStatus, Priority
from raybatch.state import SqlStateStore
from raybatch.steps import deal


class Pauses:
    """The driver's sleep and clock: each pause is recorded and moves the clock on (the loop's own
    work takes no time); a run that would go on forever fails instead."""

    def __init__(self, pauses: list[float], limit: int = 500) -> None:
        self.pauses, self.limit = pauses, limit
        self.clock = FakeClock()

    def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.clock.advance(seconds)
        assert len(self.pauses) < self.limit, "the run does not end"

    def paced(self) -> dict[str, Any]:
        """The Driver's ``sleep`` and ``monotonic``."""
        return {"sleep": self, "monotonic": self.clock.monotonic}


def run_against(
    state: SqlStateStore, jobs: list[int], coordinator: CoordinatorState, pauses: Pauses | None = None
) -> Any:
    """The driver's run of ``jobs`` against ``coordinator``: its prepare tasks end at once, one writer."""
    handle = StandInCoordinator(coordinator)
    parts = driver_parts(state, StandInTasks(), [StandInWriter(state, [])], lambda: handle)
    return Driver(state, jobs, parts, **(pauses or Pauses([])).paced()).run()


class DiesAfterOffer(CoordinatorState):
    """A coordinator that keeps the first offer unanswered, then its process dies."""

    handle: StandInCoordinator

    def offer_all(self, offers: list[tuple[int, dict[int, Any], str, int]]) -> None:
        super().offer_all(offers[:1])
        self.handle.dead = True


@pytest.mark.parametrize("death", [ActorDiedError, RayActorError])
def test_the_driver_outlives_a_dead_coordinator_and_its_stale_handle(
    state: SqlStateStore, death: type
) -> None:
    jobs = [pending_job(state, n) for n in range(3)]
    first = DiesAfterOffer(state, answer=False)
    first.handle = StandInCoordinator(first, death=death)
    live = CoordinatorState(state)
    # After the death, the first fetch still finds the dead actor's handle; the next one is live.
    handles = [first.handle, StandInCoordinator(first, dead=True, death=death), StandInCoordinator(live)]
    fetched: list[Any] = []

    def coordinator() -> Any:
        fetched.append(handles[min(len(fetched), len(handles) - 1)])
        return fetched[-1]

    log: list[tuple[str, int]] = []
    parts = driver_parts(state, StandInTasks(), [StandInWriter(state, log)], coordinator)
    pauses: list[float] = []
    ended = Driver(state, jobs, parts, **Pauses(pauses).paced()).run()

    assert [j.status for j in ended] == [JobStatus.COMPLETED] * 3
    assert len(first.offered) == 1
    assert first.offered[0] in live.offered  # what the dead one held was offered again
    assert len(fetched) >= 3
    assert any(p > 0 for p in pauses)  # a stale handle is fetched again after a pause


class CountsOffers(CoordinatorState):
    """A live coordinator that records each call's offers."""

    calls: list[list[int]]

    def offer_all(self, offers: list[tuple[int, dict[int, Any], str, int]]) -> None:
        self.calls.append([offer[0] for offer in offers])
        super().offer_all(offers)


def test_jobs_prepared_in_one_step_are_offered_in_one_call(state: SqlStateStore) -> None:
    jobs = [pending_job(state, n) for n in range(3)]
    live = CountsOffers(state)
    live.calls = []
    parts = driver_parts(state, StandInTasks(), [StandInWriter(state, [])], lambda: StandInCoordinator(live))
    ended = Driver(state, jobs, parts, **Pauses([]).paced()).run()

    assert [j.status for j in ended] == [JobStatus.COMPLETED] * 3
    assert live.calls == [sorted(jobs)]


def answered_job(state: SqlStateStore, n: int) -> int:
    job_id = pending_job(state, n)
    state.transition(job_id, [JobStatus.PENDING], JobStatus.ANSWERED)
    return job_id


def test_a_free_writer_takes_the_next_job_as_soon_as_its_write_ends(
    state: SqlStateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deal, "GROUP_JOBS", 1)  # a job a call, so that each one waits for a writer
    jobs = [answered_job(state, n) for n in range(3)]
    log: list[tuple[str, int]] = []
    writer = StandInWriter(state, log, hold=True)
    parts = driver_parts(state, StandInTasks(), [writer], lambda: StandInCoordinator(CoordinatorState(state)))

    def wait(refs: list[Any], timeout: float) -> None:
        """Ray's wait: returns when the write in flight ends (the test ends it here)."""
        running = [r for r in writer.refs if not r.done]
        assert running and running[0] in refs, "the driver must wake when a write ends"
        log.append(("woken", 0))
        running[0].done = True

    parts.wait = wait
    ended = Driver(state, jobs, parts, **Pauses([]).paced()).run()

    assert [j.status for j in ended] == [JobStatus.COMPLETED] * 3
    # Each write starts right after the previous one ended, in the same wake-up: no tick between.
    assert log == [
        ("start", jobs[0]), ("woken", 0), ("end", jobs[0]),
        ("start", jobs[1]), ("woken", 0), ("end", jobs[1]),
        ("start", jobs[2]), ("woken", 0), ("end", jobs[2]),
    ]  # fmt: skip


def test_claims_never_exceed_the_window(state: SqlStateStore) -> None:
    jobs = [pending_job(state, n) for n in range(20)]
    tasks = StandInTasks(hold=True)
    live = StandInCoordinator(CoordinatorState(state))
    parts = driver_parts(state, tasks, [StandInWriter(state, [])], lambda: live)
    claims: list[tuple[int, int]] = []
    claim_jobs = state.claim_job_records

    def recording_claim(**kwargs: Any) -> Any:
        leases = claim_jobs(**kwargs)
        if kwargs["to_status"] is JobStatus.PREPARING:
            claims.append((kwargs["limit"], len(list(kwargs["job_ids"]))))
        return leases

    state.claim_job_records = recording_claim  # type: ignore[method-assign]
    held: list[int] = []

    def wait(refs: list[Any], timeout: float) -> None:
        held.append(parts.scheduler.held)
        for ref in tasks.refs[:1]:
            ref.done = True
        tasks.refs = [r for r in tasks.refs if not r.done]

    parts.wait = wait
    ended = Driver(state, jobs, parts, claim_window=3, **Pauses([]).paced()).run()

    assert [j.status for j in ended] == [JobStatus.COMPLETED] * 20
    assert claims and all(limit <= 3 and ids <= 3 for limit, ids in claims)
    assert max(held) == 3  # the window was used, never passed


@dataclass
class CountsSettles(CoordinatorState):
    """Each offer answered and settled at once; its snapshots say how many, and record how asked."""

    asked: list[tuple[int, float]] = field(default_factory=list)

    def snapshot(self, settled: int = -1, wait: float = 0.0) -> Any:
        self.asked.append((settled, wait))
        return replace(super().snapshot(settled, wait), settled=len(self.offered))


def test_the_driver_always_asks_for_the_next_settle_with_the_count_it_saw(state: SqlStateStore) -> None:
    """So the coordinator answers as it settles answered jobs, and the step it wakes writes them."""
    jobs = [pending_job(state, n) for n in range(3)]
    coordinator = CountsSettles(state)
    ended = run_against(state, jobs, coordinator)

    assert [j.status for j in ended] == [JobStatus.COMPLETED] * 3
    assert coordinator.asked[0] == (-1, SNAPSHOT_SECONDS)  # the first: at once, whatever it settled
    assert all(wait == SNAPSHOT_SECONDS for _, wait in coordinator.asked)
    seen = [settled for settled, _ in coordinator.asked[1:]]
    assert seen == sorted(seen) and seen[-1] == len(coordinator.offered)  # each carries the last count


@dataclass
class HoldsSnapshots(CoordinatorState):
    """Holds each offer unanswered, and each snapshot call until its wait runs out (the clock moves
    on by it), as a coordinator with nothing to settle does; answers them all in its third call."""

    clock: Any = None
    asked: int = 0
    settled: int = 0

    def snapshot(self, settled: int = -1, wait: float = 0.0) -> Any:
        self.asked += 1
        self.clock.advance(wait)
        if self.asked == 3:
            for job_id in self.offers:
                self.state.transition(job_id, [JobStatus.PREPARED], JobStatus.ANSWERED)
            self.settled = len(self.offers)
        return replace(super().snapshot(settled, wait), settled=self.settled)


def test_the_next_snapshot_is_asked_before_the_driver_waits(state: SqlStateStore) -> None:
    """With nothing else in flight, the driver's wait holds the coordinator's next snapshot, which
    comes back as soon as answers settle: the driver never sleeps a tick while answers wait."""
    jobs = [pending_job(state, n) for n in range(2)]
    slept: list[float] = []
    pauses = Pauses(slept)
    coordinator = HoldsSnapshots(state, answer=False, clock=pauses.clock)
    handle = StandInCoordinator(coordinator)
    parts = driver_parts(state, StandInTasks(), [StandInWriter(state, [])], lambda: handle)
    waits: list[int] = []
    parts.wait = lambda refs, timeout: waits.append(len(refs))
    ended = Driver(state, jobs, parts, **pauses.paced()).run()

    assert [j.status for j in ended] == [JobStatus.COMPLETED] * 2
    assert coordinator.asked >= 3
    assert slept == []  # every wait held a snapshot in flight (before, a tick's sleep each time)
    assert waits and all(n >= 1 for n in waits)


@dataclass
class DatabaseAwayAtFirst(CoordinatorState):
    """Its first snapshots fail as a coordinator's do while its database is away."""

    failures: int = 2
    asked_at: list[float] = field(default_factory=list)
    clock: Any = None

    def snapshot(self, settled: int = -1, wait: float = 0.0) -> Any:
        self.asked_at.append(self.clock.monotonic())
        if len(self.asked_at) <= self.failures:
            raise DatabaseUnavailable("state database unavailable: connection refused")
        return super().snapshot(settled, wait)


def test_a_snapshot_that_fails_for_a_database_outage_is_asked_again_later(state: SqlStateStore) -> None:
    """A coordinator's database may go away while a snapshot waits for a settle: the run goes on."""
    jobs = [pending_job(state, n) for n in range(2)]
    pauses = Pauses([])
    coordinator = DatabaseAwayAtFirst(state, clock=pauses.clock)
    ended = run_against(state, jobs, coordinator, pauses)

    assert [j.status for j in ended] == [JobStatus.COMPLETED] * 2
    assert len(coordinator.asked_at) >= 2  # asked again after a failure
    gaps = [b - a for a, b in itertools.pairwise(coordinator.asked_at[: coordinator.failures + 1])]
    assert all(gap >= SNAPSHOT_SECONDS for gap in gaps)  # not asked again at once, in a loop


class RestartsInPlace(CoordinatorState):
    """Ray restarts the actor between two calls: its offers are gone, and no call ever failed."""

    restarted: bool = False

    def snapshot(self, settled: int = -1, wait: float = 0.0) -> Any:
        if self.offers and not self.restarted:
            self.offers.clear()
            self.restarted, self.answer = True, True
        return super().snapshot(settled, wait)


def test_offers_lost_by_a_coordinator_restarted_in_place_are_made_again(state: SqlStateStore) -> None:
    jobs = [pending_job(state, n) for n in range(2)]
    coordinator = RestartsInPlace(state, answer=False)
    ended = run_against(state, jobs, coordinator)

    assert coordinator.restarted
    assert [j.status for j in ended] == [JobStatus.COMPLETED] * 2
    assert coordinator.offered.count(jobs[0]) >= 2  # offered, lost, offered again


class AnswersAndLetsGo(CoordinatorState):
    """Answers each offer at once and holds it no longer: its snapshots say it holds none."""

    def snapshot(self, settled: int = -1, wait: float = 0.0) -> Any:
        self.offers.clear()
        return super().snapshot(settled, wait)


def test_offers_answered_before_the_driver_looked_are_not_made_again(state: SqlStateStore) -> None:
    """A coordinator that holds none of the driver's offers may have answered them all (what a
    run's last batches do): the driver looks at those jobs before it offers anything again."""
    jobs = [pending_job(state, n) for n in range(3)]
    coordinator = AnswersAndLetsGo(state)
    ended = run_against(state, jobs, coordinator)

    assert [j.status for j in ended] == [JobStatus.COMPLETED] * 3
    assert sorted(coordinator.offered) == sorted(jobs)  # each offered once: none made again


class DiesAfterLosingOffers(RestartsInPlace):
    """Its snapshot says it holds nothing, and then its process is gone: the offers made again fail."""

    handle: StandInCoordinator

    def snapshot(self, settled: int = -1, wait: float = 0.0) -> Any:
        taken = super().snapshot(settled, wait)
        self.handle.dead = self.handle.dead or self.restarted
        return taken


def test_a_coordinator_that_dies_while_offers_are_made_again_is_fetched_again(state: SqlStateStore) -> None:
    jobs = [pending_job(state, n) for n in range(2)]
    first = DiesAfterLosingOffers(state, answer=False)
    first.handle = StandInCoordinator(first)
    live = CoordinatorState(state)
    handles = iter([first.handle, StandInCoordinator(live)])
    parts = driver_parts(state, StandInTasks(), [StandInWriter(state, [])], lambda: next(handles))
    ended = Driver(state, jobs, parts, **Pauses([]).paced()).run()

    assert first.restarted
    assert [j.status for j in ended] == [JobStatus.COMPLETED] * 2
    assert jobs[0] in live.offered


class RejectsTheKey(CoordinatorState):
    """A coordinator whose API key was rejected: it says so in its snapshot, and answers nothing."""

    def snapshot(self, settled: int = -1, wait: float = 0.0) -> Any:
        reason = "Claude rejected the credentials; set ANTHROPIC_API_KEY and run again (401)"
        return replace(super().snapshot(settled, wait), stopped=reason)


def test_rejected_credentials_end_the_run_at_once_with_the_reason(state: SqlStateStore) -> None:
    from raybatch.errors import AuthenticationFailed

    jobs = [pending_job(state, n) for n in range(3)]
    coordinator = StandInCoordinator(RejectsTheKey(state, answer=False))
    parts = driver_parts(state, StandInTasks(), [StandInWriter(state, [])], lambda: coordinator)
    driver = Driver(state, jobs, parts, **Pauses([], limit=50).paced())
    with pytest.raises(AuthenticationFailed, match="ANTHROPIC_API_KEY"):
        driver.run()  # without the stop, it would wait for answers until the pause limit


class WallPauses(Pauses):
    """Pauses that also let a little real time pass, for leases the database times by the wall clock."""

    def __call__(self, seconds: float) -> None:
        super().__call__(seconds)
        time.sleep(0.02)


def test_a_job_a_dead_driver_was_preparing_is_taken_once_its_lease_runs_out(state: SqlStateStore) -> None:
    jobs = [pending_job(state, n) for n in range(2)]
    claim = {"from_statuses": [JobStatus.PENDING], "to_status": JobStatus.PREPARING, "limit": 1}
    state.claim_jobs(worker_id="dead-driver", lease_seconds=0.5, job_ids=[jobs[0]], **claim)  # type: ignore[arg-type]
    live = StandInCoordinator(CoordinatorState(state))
    parts = driver_parts(state, StandInTasks(), [StandInWriter(state, [])], lambda: live)
    # The first claim comes while the dead driver's lease still runs: refused, then taken later.
    ended = Driver(state, jobs, parts, **WallPauses([]).paced()).run()

    assert [j.status for j in ended] == [JobStatus.COMPLETED] * 2


@pytest.mark.parametrize("work", ["to prepare", "already answered", "urgent"])
def test_writers_start_once_jobs_are_prepared_or_when_nothing_is_to_be_prepared(
    state: SqlStateStore, work: str
) -> None:
    status = JobStatus.ANSWERED if work == "already answered" else JobStatus.PENDING
    jobs = [pending_job(state, n, status=status) for n in range(2)]
    if work == "urgent":
        state.set_priority(jobs, Priority.URGENT)
    log: list[tuple[str, int]] = []
    tasks = StandInTasks(hold=True)
    parts = driver_parts(state, tasks, [], lambda: StandInCoordinator(CoordinatorState(state)))
    started: list[int] = []

    def start() -> bool:  # what the pipeline does: start a writer actor, then hand it over
        started.append(len(tasks.launched))
        parts.writers.grow([StandInWriter(state, log)])
        return len(started) < 2

    def wait(refs: list[Any], timeout: float) -> None:  # each wake-up: the prepare tasks end
        for ref in tasks.refs:
            ref.done = True

    parts.start_writer, parts.wait = start, wait
    ended = Driver(state, jobs, parts, **Pauses([]).paced()).run()

    assert [j.status for j in ended] == [JobStatus.COMPLETED] * 2
    # Preparing: the first writer starts once nothing is left to prepare (this coordinator never
    # says a batch is in flight), not before the tasks were launched; work with nothing to prepare
    # starts it at once, and urgent work every writer at once.
    assert started == {"to prepare": [2], "already answered": [0], "urgent": [0, 0]}[work]


@dataclass
class SendsAtFourthLook(CoordinatorState):
    """Holds its offers; from its fourth snapshot on, a batch of them is in flight, and from its
    sixth on, those offered are answered."""

    asked: int = 0

    def snapshot(self, settled: int = -1, wait: float = 0.0) -> Any:
        self.asked += 1
        if self.asked >= 6:
            for job_id in self.offers:
                self.state.transition(job_id, [JobStatus.PREPARED], JobStatus.ANSWERED)
        return replace(super().snapshot(settled, wait), active_batches=int(self.asked >= 4))


def test_writers_start_once_answers_are_on_their_way_not_while_the_first_jobs_are_prepared(
    state: SqlStateStore,
) -> None:
    """A writer's start is about a second of CPU, which the first preparations and the
    coordinator's own start need: it comes once the coordinator has a batch in flight."""
    jobs = [pending_job(state, n) for n in range(10)]
    tasks = StandInTasks(hold=True)
    coordinator = SendsAtFourthLook(state, answer=False)
    parts = driver_parts(state, tasks, [], lambda: StandInCoordinator(coordinator))
    started: list[tuple[int, int]] = []  # (snapshots asked, tasks ended) at each start

    def start() -> bool:
        started.append((coordinator.asked, sum(ref.done for ref in tasks.refs)))
        parts.writers.grow([StandInWriter(state, [])])
        return False

    def wait(refs: list[Any], timeout: float) -> None:  # each wake-up: one prepare task ends
        running = [ref for ref in tasks.refs if not ref.done]
        if running:
            running[0].done = True

    parts.start_writer, parts.wait = start, wait
    ended = Driver(state, jobs, parts, **Pauses([]).paced()).run()

    assert [j.status for j in ended] == [JobStatus.COMPLETED] * len(jobs)
    [(asked, tasks_ended)] = started
    assert asked >= 4  # not before the coordinator had a batch in flight
    assert tasks_ended < len(jobs)  # nor only once every job was prepared


@pytest.mark.parametrize(("jobs_in_run", "writers_at_first"), [(3, 1), (4, 2), (12, 3)])
def test_a_backlog_starts_as_many_writers_as_it_keeps_busy_with_the_first(
    state: SqlStateStore, jobs_in_run: int, writers_at_first: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BACKLOG_JOBS_PER_WRITER of the run's jobs still to end for each writer: they all start
    together, once answers are on their way (a second of CPU each, while the first batch is out),
    not once the answers wait for them; a small run keeps one."""
    monkeypatch.setattr(driver_module, "BACKLOG_JOBS_PER_WRITER", 2)
    jobs = [pending_job(state, n) for n in range(jobs_in_run)]
    tasks = StandInTasks(hold=True)
    parts = driver_parts(state, tasks, [], lambda: StandInCoordinator(CoordinatorState(state)))
    started: list[int] = []

    def start() -> bool:  # RESULT_WORKERS=3
        started.append(len(tasks.launched))
        parts.writers.grow([StandInWriter(state, [])])
        return len(started) < 3

    def wait(refs: list[Any], timeout: float) -> None:
        for ref in tasks.refs:
            ref.done = True

    parts.start_writer, parts.wait = start, wait
    ended = Driver(state, jobs, parts, writer_grow_seconds=60.0, **Pauses([]).paced()).run()

    assert [j.status for j in ended] == [JobStatus.COMPLETED] * jobs_in_run
    first = started[0]
    assert first > 0  # once the first tasks were launched, as ever
    assert started[:writers_at_first] == [first] * writers_at_first
    assert started[writers_at_first:] == [] or started[writers_at_first] > first


class TimedWriter(StandInWriter):
    """A writer whose writes each take ``seconds`` a job on the test's clock."""

    def __init__(self, state: SqlStateStore, clock: FakeClock, seconds: float) -> None:
        self.log: list[tuple[str, int]] = []
        super().__init__(state, self.log, hold=True)
        self.clock, self.seconds = clock, seconds
        self.began: dict[int, float] = {}  # a write → when it ends
        self.started_at = clock.monotonic()

    def remote(self, leases: Any) -> Any:
        ref = super().remote(leases)
        self.began[id(ref)] = self.clock.monotonic() + self.seconds * len(leases)  # when it ends
        return ref

    def due(self) -> float:
        """Seconds until the next of its writes ends (inf: none is running)."""
        running = [self.began[id(r)] for r in self.refs if not r.done]
        return min(running, default=float("inf")) - self.clock.monotonic()

    def end_due(self) -> None:
        for ref in self.refs:
            ref.done = ref.done or self.began[id(ref)] <= self.clock.monotonic() + 1e-9


@pytest.mark.parametrize(("write_seconds", "writers_started"), [(0.1, 1), (1.0, 3)])
def test_another_writer_starts_only_while_answered_jobs_wait_for_one(
    state: SqlStateStore, write_seconds: float, writers_started: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deal, "GROUP_JOBS", 1)  # a job a call: the jobs beyond a writer's call wait
    jobs = [answered_job(state, n) for n in range(12)]
    pauses = Pauses([])
    clock = pauses.clock
    parts = driver_parts(state, StandInTasks(), [], lambda: StandInCoordinator(CoordinatorState(state)))
    writers: list[TimedWriter] = []

    def start() -> bool:  # RESULT_WORKERS=3
        writers.append(TimedWriter(state, clock, write_seconds))
        parts.writers.grow(writers[-1:])
        return len(writers) < 3

    def wait(refs: list[Any], timeout: float) -> None:  # Ray's wait: until a write ends, or the timeout
        clock.advance(max(0.0, min([timeout] + [w.due() for w in writers])))
        for writer in writers:
            writer.end_due()

    parts.start_writer, parts.wait = start, wait
    ended = Driver(state, jobs, parts, writer_grow_seconds=2.0, **pauses.paced()).run()

    assert [j.status for j in ended] == [JobStatus.COMPLETED] * 12
    # One writer that keeps up stays alone (12 writes in 1.2 s); slow writes bring another each
    # time jobs waited 2 s for a writer, up to RESULT_WORKERS.
    assert len(writers) == writers_started
    starts = [w.started_at for w in writers]
    assert all(later - earlier >= 2.0 for earlier, later in itertools.pairwise(starts))
    assert sum(what == "start" for w in writers for what, _ in w.log) == 12


def test_a_backlog_of_answered_jobs_starts_another_writer_at_once(state: SqlStateStore) -> None:
    """GROW_NOW_JOBS answered jobs waiting for a busy writer are a backlog: the next writer starts
    without waiting out WRITER_GROW_SECONDS (which a small run's last few jobs do)."""
    # the first writer's call takes GROUP_JOBS of them; more than GROW_NOW_JOBS are left waiting
    jobs = [answered_job(state, n) for n in range(deal.GROUP_JOBS + GROW_NOW_JOBS + 8)]
    pauses = Pauses([])
    clock = pauses.clock
    parts = driver_parts(state, StandInTasks(), [], lambda: StandInCoordinator(CoordinatorState(state)))
    writers: list[TimedWriter] = []

    def start() -> bool:  # RESULT_WORKERS=2
        writers.append(TimedWriter(state, clock, 0.5))
        parts.writers.grow(writers[-1:])
        return len(writers) < 2

    def wait(refs: list[Any], timeout: float) -> None:
        clock.advance(max(0.0, min([timeout] + [w.due() for w in writers])))
        for writer in writers:
            writer.end_due()

    parts.start_writer, parts.wait = start, wait
    ended = Driver(state, jobs, parts, writer_grow_seconds=60.0, **pauses.paced()).run()

    assert [j.status for j in ended] == [JobStatus.COMPLETED] * len(jobs)
    assert len(writers) == 2
    assert writers[1].started_at - writers[0].started_at < 1.0  # not after 60 s of waiting
