"""Driver: the loop that carries one run's jobs from pending to completed on Ray.

The loop waits on whatever is in flight (prepare tasks, writes, registrations, the coordinator's
snapshot) and acts as soon as one of them is done: a finished chunk may complete a job, which is
offered at once; a free writer takes the next admissible answered job at once. The database work
of one step is bounded, however long the backlog: pending jobs are claimed in a window, answered
jobs are read a few at a time, the run's other jobs are looked at a slice per step (a sweep), all
leases are renewed in one statement, and progress comes from what the driver has seen.

The coordinator and the writers may die and come back: the DB says where every job stands, and
the driver re-offers the prepared payloads it owns.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ParamSpec, Protocol

from ray.exceptions import RayActorError

from raybatch.coordinator.calls import CoordinatorHandle
from raybatch.errors import AuthenticationFailed, RaybatchError, TransientError
from raybatch.loops.scheduler import PrepareScheduler, ReadyJob
from raybatch.loops.writer_pool import WriterPool
from raybatch.models import TERMINAL_JOB_STATUSES, JobRecord, JobStatus, Lease, Priority
from raybatch.retry import Backoff, retrying
from raybatch.spend import parked_reason
from raybatch.state.port import Flags, JobGlance, JobStates
from raybatch.steps.deal import GROUP_JOBS

log = logging.getLogger(__name__)

STALL_SECONDS = 120.0  # say what the run waits for after this long without any change
SWEEP_SIZE = 500  # the run's jobs looked at per sweep, to notice what others changed
SWEEP_SECONDS = 1.0  # at most this often
# A sweep reads only the jobs updated since the slice was last looked at (and any left by a dead
# driver); SWEEP_MARGIN_SECONDS more for the clocks of other nodes; every FULL_SWEEP_SECONDS it
# reads them all, for whatever a changed row would not show.
SWEEP_MARGIN_SECONDS = 2.0
FULL_SWEEP_SECONDS = 10.0
ANSWERED_POLL_SECONDS = 0.2  # how often idle writers look for answered jobs, between events
SNAPSHOT_SECONDS = 0.25  # the longest a snapshot of the coordinator's backlog waits for answers
FLUSH_SECONDS = 5.0  # the flush flag is sent again this often (a restarted coordinator lost it)
PROGRESS_SECONDS = 0.2
PARKED_SECONDS = 1.0  # how often progress asks the database whether sending is parked
URGENT_POLL_SECONDS = 0.25  # how often urgent pending jobs are looked for in the database
URGENT_LOOKAHEAD = 100  # urgent jobs of other runs passed over when looking for this run's
RECONNECT_BACKOFF = Backoff(initial=0.2, factor=2.0, cap=5.0)  # a dead coordinator fetched again
# Answered jobs waiting, every writer busy, that start another writer at once rather than after
# WRITER_GROW_SECONDS: a backlog, not a small run's last few jobs.
GROW_NOW_JOBS = 32
# The run's own jobs still to end, for each writer started, that start another with the first (or
# with the next, as registering finds more): a backlog's writers start up while it is prepared,
# not once its answers wait for them (a writer's start is about a second of CPU).
BACKLOG_JOBS_PER_WRITER = 128

P = ParamSpec("P")


class DriverState(JobStates, Flags, Protocol):
    """The slices of the state store the driver's loop reads and moves jobs through."""


@dataclass(frozen=True)
class Progress:
    """Where a run stands, for progress bars and progress lines."""

    total: int
    by_status: dict[str, int]
    pages_total: int
    pages_prepared: int
    documents: int
    active_batches: int
    writer_mb: float
    paused: bool
    elapsed: float
    parked: str | None = None  # why submissions wait for a higher spend cap
    pages_from_store: int = 0  # of pages_prepared: prepared by an earlier ``estimate``, not again
    review_pending: int = 0  # documents written that wait for a person (raybatch.review)
    urgent_total: int = 0  # of total: urgent jobs
    urgent_done: int = 0  # of done: urgent jobs ended

    @property
    def done(self) -> int:
        return sum(self.by_status.get(s.value, 0) for s in TERMINAL_JOB_STATUSES)


class JobIntake(Protocol):
    """Jobs that join the run while it runs (registration in Ray tasks)."""

    @property
    def refs(self) -> list[Any]:
        """What is in flight: the driver wakes when one of these is done."""
        ...

    @property
    def finished(self) -> bool:
        """No more jobs will come."""
        ...

    def take(self) -> list[JobRecord]:
        """The jobs registered since the last call (without waiting)."""
        ...


def _no_wait(refs: list[Any], timeout: float) -> None:
    return None


@dataclass
class DriverParts:
    """What the driver drives: built by the pipeline from Ray, or by tests from stand-ins."""

    scheduler: PrepareScheduler
    writers: WriterPool
    coordinator: Callable[[], Any]  # returns a handle; called again after the actor died
    call: Callable[[Any], Any] = field(default=lambda ref: ref)  # ray.get in production
    ready: Callable[[Any], bool] = field(default=lambda ref: True)  # is a result there (ray.wait)
    # Block until one of the refs is done or the timeout passed (ray.wait with num_returns=1).
    wait: Callable[[list[Any], float], None] = field(default=_no_wait)
    intake: JobIntake | None = None
    # Starts one more writer; False once every one (RESULT_WORKERS) runs. The first is started once
    # answers are on their way (or nothing is left to prepare), so that its start does not take the
    # CPU the first preparations need; another each time answered jobs waited for a free writer.
    start_writer: Callable[[], bool] = field(default=lambda: False)


class Driver:
    """Runs the loop for the jobs of one run until each one ended."""

    def __init__(
        self,
        state: DriverState,
        job_ids: Sequence[int],
        parts: DriverParts,
        *,
        lease_seconds: float = 60.0,
        tick_seconds: float = 0.5,
        claim_window: int | Callable[[], int] = 64,
        writer_grow_seconds: float = 2.0,
        drain_seconds: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._state = state
        self._parts = parts
        self._lease_seconds = lease_seconds
        self._tick_seconds = tick_seconds
        self._grow_seconds = writer_grow_seconds
        self._drain_seconds = drain_seconds  # DRAIN_SECONDS: how long a stop waits for writes under way
        # A callable window follows the prepare cap as the cluster grows or shrinks.
        self._window = claim_window if callable(claim_window) else (lambda: claim_window)
        self._sleep = sleep
        self._monotonic = monotonic
        self._coordinator = CoordinatorHandle(parts.coordinator())
        self._offered: dict[int, ReadyJob] = {}
        self._seen: dict[int, JobStatus] = {}  # the run's jobs, by the status last seen
        self._urgent: set[int] = set()  # those of them known to be urgent
        self._counts: Counter[JobStatus] = Counter()
        self._pages_total = 0
        self._queue: deque[int] = deque()  # jobs to claim for preparing, in order
        self._queued: set[int] = set()
        self._sweep: list[int] = []
        self._cursor = 0
        self._cycle_at: float | None = None  # when the sweep last began again at the first slice
        self._changed_within: float | None = None  # the seconds of changes the slices of this cycle read
        self._to_forget: list[int] = []
        self._sent: list[Any] = []  # coordinator calls not yet answered, oldest first
        self._candidates: list[JobRecord] = []
        self._documents = 0
        self._review_pending = 0
        self._snapshot: Any = None
        self._snapshot_ref: Any = None
        self._snapshot_asked_at = 0.0
        self._first_settled: int | None = None
        now = monotonic()
        self._started = self._last_renew = self._moved_at = now
        self._asked_answered = self._sent_flush = self._reported = self._snapshot_again_at = -1e9
        self._parked_at: float = -1e9
        self._parked_why: str | None = None
        self._swept = self._asked_urgent = -1e9
        self._full_swept = now
        self._flushing: bool | None = None
        self._writers_started = 0
        self._more_writers = True  # fewer than RESULT_WORKERS started
        self._short_since: float | None = None  # since when answered jobs wait with every writer busy
        self._last_move: Any = None
        self.add(state.get_jobs(job_ids))

    def add(self, jobs: Sequence[JobRecord]) -> None:
        """Jobs joining the run (registered before the run or while it runs)."""
        for job in jobs:
            if job.priority is Priority.URGENT:
                self._urgent.add(job.id)
            if job.id in self._seen:
                continue
            self._pages_total += job.pages or 0
            self._sweep.append(job.id)
            self._see(job.id, job.status)

    def _see(self, job_id: int, status: JobStatus) -> None:
        """Record a job's status, and act on what it means for this driver."""
        before = self._seen.get(job_id)
        if before is not None:
            self._counts[before] -= 1
        self._seen[job_id] = status
        self._counts[status] += 1
        if status in _PAST_PAYLOADS and job_id in self._offered:
            del self._offered[job_id]
            self._to_forget.append(job_id)
        if self._parts.scheduler.holds(job_id):
            return
        if status in (JobStatus.PENDING, JobStatus.PREPARING):
            self._enqueue(job_id)  # a preparing job not ours is claimed once its lease expired
        elif status is JobStatus.PREPARED and job_id not in self._offered:
            self._reprepare(job_id)

    def _reprepare(self, job_id: int) -> None:
        """A job prepared by a driver that is gone: its payloads are gone with it. One another
        driver holds (it renews the hold while it offers the job) is left to that driver, and one
        whose hold lapsed gets a whole lease more to renew it (a late renewal is not a death)."""
        if self._state.requeue_unheld(job_id, JobStatus.PREPARED, 2 * self._lease_seconds):
            log.info("job %d: prepared payloads are gone; preparing it again", job_id)
            self._see(job_id, JobStatus.PENDING)

    def _enqueue(self, job_id: int) -> None:
        if job_id not in self._queued:
            self._queued.add(job_id)
            self._queue.append(job_id)

    @property
    def _live(self) -> int:
        return sum(n for status, n in self._counts.items() if not status.terminal)

    def run(
        self,
        on_progress: Callable[[Progress], None] | None = None,
        *,
        stop: Callable[[], bool] = lambda: False,
    ) -> list[JobRecord]:
        """Drive until every job of the run ended, or until ``stop()`` (then drain); returns the
        jobs as they are."""
        while True:
            if stop():
                self._drain()
                if on_progress is not None:
                    on_progress(self._progress())
                return self._state.get_jobs(self._seen)
            self._step()
            if self._live == 0 and (self._parts.intake is None or self._parts.intake.finished):
                for report in self._parts.writers.drain():
                    self._documents += report.documents
                    self._review_pending += report.review_pending
                self._forget()
                for ref in self._sent:
                    self._parts.wait([ref], self._tick_seconds)
                if on_progress is not None:
                    on_progress(self._progress())
                return self._state.get_jobs(self._seen)
            if on_progress is not None and self._monotonic() - self._reported >= PROGRESS_SECONDS:
                self._reported = self._monotonic()
                on_progress(self._progress())
            self._watch()
            self._wait()

    def _drain(self) -> None:
        """Asked to stop (SIGTERM, Ctrl-C): take no more work; the writes under way may end within
        DRAIN_SECONDS; hand back the rest at once: jobs being prepared to pending, writes past the
        bound to answered (no try counted), offered jobs released to any other driver."""
        log.warning(
            "stopping: writes under way may take %.0f s; the rest is handed back", self._drain_seconds
        )
        preparing = self._parts.scheduler.hand_back()
        self._documents += sum(r.documents for r in self._parts.writers.drain(self._drain_seconds))
        writing = self._parts.writers.hand_back()
        offered = list(self._offered)
        if offered:
            self._send(self._coordinator.forget, offered)  # its payloads go with this driver
            try:
                self._state.hold_jobs(self._parts.scheduler.worker_id, offered, JobStatus.PREPARED, 0.0)
            except RaybatchError as exc:  # the database is away: the holds run out by themselves
                log.warning("could not release the offered jobs: %s", exc)
        log.warning("stopped: %d jobs back to pending, %d to answered", len(preparing), len(writing))

    def _wait(self) -> None:
        """Until something in flight is done, or the tick passed."""
        refs = self._parts.scheduler.refs + self._parts.writers.refs
        if self._snapshot_ref is not None:
            refs.append(self._snapshot_ref)
        if self._parts.intake is not None:
            refs += self._parts.intake.refs
        timeout = self._parts.scheduler.wake_in(self._tick_seconds)
        if refs:
            self._parts.wait(refs, timeout)
        else:
            self._sleep(timeout)

    def _step(self) -> None:
        if self._parts.intake is not None:
            self.add(self._parts.intake.take())
        self._sweep_some()
        self._claim()
        self._start_writers()
        self._refresh_snapshot()
        backlog = self._snapshot.pending_bytes if self._snapshot else 0
        self._offer(self._parts.scheduler.tick(backlog))
        self._write()
        self._flush()
        self._forget()
        self._check_sent()
        self._renew_leases()

    def _sweep_some(self) -> None:
        """Look at the next slice of the run's live jobs: what the coordinator, other drivers or a
        person changed (answered, failed, canceled, prepared again, a dead driver's lease)."""
        if self._monotonic() - self._swept < SWEEP_SECONDS:
            return
        self._swept = self._monotonic()
        if self._cursor >= len(self._sweep):
            self._sweep = [j for j in self._sweep if not self._seen[j].terminal]
            self._cursor = 0
            self._new_cycle()
        ids = self._sweep[self._cursor : self._cursor + SWEEP_SIZE]
        self._cursor += SWEEP_SIZE
        if ids:
            self._look(ids, self._changed_within)

    def _look(self, ids: Sequence[int], changed_within: float | None = None) -> None:
        """Take in what the database says of these jobs (see ``_sweep_some``)."""
        for job in self._state.glance_jobs(ids, changed_within=changed_within):
            if job.priority is Priority.URGENT:
                self._urgent.add(job.id)
            if self._holds(job.id):
                self._stop_if_canceled(job)
            # A prepared job held by another driver is looked at again: that driver may be gone.
            elif job.status is not self._seen[job.id] or self._orphan(job):
                self._see(job.id, job.status)

    def _new_cycle(self) -> None:
        """The sweep begins again: its slices read what changed since the last cycle began (each
        slice was looked at after that), or everything now and then."""
        now, last = self._monotonic(), self._cycle_at
        self._cycle_at = now
        if last is None or now - self._full_swept >= FULL_SWEEP_SECONDS:
            self._full_swept, self._changed_within = now, None
        else:
            self._changed_within = now - last + SWEEP_MARGIN_SECONDS

    def _stop_if_canceled(self, job: JobGlance) -> None:
        """A job this driver prepares, canceled meanwhile: its preparation stops now (its writer,
        if it has one, is fenced by the database)."""
        if job.status is JobStatus.CANCELED and self._parts.scheduler.holds(job.id):
            log.info("job %d: canceled; its preparation stops", job.id)
            self._parts.scheduler.forget([job.id])
            self._see(job.id, job.status)

    def _orphan(self, job: JobGlance) -> bool:
        """A job no driver holds any more: prepared (worth asking the database to requeue it), or
        preparing under a lease that ran out and not queued here (a claim refused while the dead
        holder's lease still ran is worth making again)."""
        if job.status is JobStatus.PREPARED:
            orphan = job.id not in self._offered
        else:
            orphan = job.status is JobStatus.PREPARING and job.id not in self._queued
        return orphan and (job.held_until is None or job.held_until <= datetime.now(UTC))

    def _urgent_pending(self, limit: int) -> set[int]:
        """This run's urgent jobs waiting to be prepared (made urgent since the run began), asked
        for a few times a second. Another process's urgent jobs are its own driver's: a prepared
        job is taken back by a driver that did not offer it, so two drivers never share one."""
        now = self._monotonic()
        if now - self._asked_urgent < URGENT_POLL_SECONDS:
            return set()
        self._asked_urgent = now
        found = self._state.claimable_jobs(
            [JobStatus.PENDING], JobStatus.PREPARING, limit=limit + URGENT_LOOKAHEAD, priority=Priority.URGENT
        )
        mine = [job for job in found if job.id in self._seen][:limit]
        self.add(mine)  # notes them as urgent
        for job in mine:
            self._see(job.id, job.status)
        return {job.id for job in mine}

    def _holds(self, job_id: int) -> bool:
        """A job this driver is preparing or writing: it learns that job's changes first-hand."""
        return self._parts.scheduler.holds(job_id) or self._parts.writers.holds(job_id)

    def _claim(self) -> None:
        """Claim queued jobs while fewer than the window are being prepared, urgent ones first."""
        scheduler = self._parts.scheduler
        window = max(1, self._window())
        room = window - scheduler.held
        if room <= 0:
            return
        urgent = self._urgent_pending(room)
        if not self._queue:
            return
        # Half the window at a time: each claim is a few statements, and the jobs still
        # held keep the prepare tasks busy meanwhile.
        if not urgent and scheduler.held and room < window // 2:
            return
        if urgent:
            self._queue = deque(j for j in self._queue if j not in urgent)
        ids = sorted(j for j in urgent if j in self._queued)
        ids += [self._queue.popleft() for _ in range(min(room - len(ids), len(self._queue)))]
        self._queued.difference_update(ids)
        scheduler.claim(ids)
        for job_id in ids:
            if scheduler.holds(job_id):
                self._see(job_id, JobStatus.PREPARING)

    def _write(self) -> None:
        """Admit answered jobs to free writers; a write that just ended frees its writer at once."""
        writers = self._parts.writers
        for report in writers.collect():
            self._documents += report.documents
            self._review_pending += report.review_pending
            self._see(report.job_id, report.status)
            if report.error:
                log.warning("job %d: %s", report.job_id, report.error)
            if not self._candidates:
                self._asked_answered = -1e9  # look for the next job now, not at the next poll
        if writers.idle_count:
            self._admit()
        self._grow_writers()

    def _admit(self) -> None:
        writers = self._parts.writers
        now = self._monotonic()
        if not self._candidates or now - self._asked_answered >= ANSWERED_POLL_SECONDS:
            self._asked_answered = now
            # A call may take a group; while more writers may start, a group more than the idle
            # writers take shows whether a backlog waits (GROW_NOW_JOBS).
            calls = writers.idle_count + (1 if self._more_writers else 0)
            limit = GROUP_JOBS * calls + 2 * len(writers.leases) + 8
            answered = [JobStatus.ANSWERED]
            self._candidates = self._state.claimable_jobs(answered, JobStatus.WRITING, limit=limit)
        for job_id in writers.admit(self._candidates):
            if job_id in self._seen:
                self._see(job_id, JobStatus.WRITING)
        taken = {lease.job_id for lease in writers.leases} | writers.gone
        self._candidates = [j for j in self._candidates if j.id not in taken]

    def _start_writers(self) -> None:
        """Once answers are on their way (the coordinator sent a batch or a call, or settled
        answers), or no preparation is coming (e.g. every job is answered already); at once for
        urgent work, whose time to documents counts more than the first chunk's. A writer's start
        is about a second of CPU: started while the first jobs are prepared, it delayed them and
        the coordinator's own start, and so the first batch. As many as the run's jobs still to end
        make a backlog for (``BACKLOG_JOBS_PER_WRITER`` each): a small run keeps one writer until
        its answers wait (``_grow_writers``)."""
        if not self._writers_started:
            if not (self._answers_coming() or self._urgent or self._preparing_nothing()):
                return
            self._start_writer()
            while self._urgent and self._more_writers:
                self._start_writer()
        while self._more_writers and self._live >= BACKLOG_JOBS_PER_WRITER * (self._writers_started + 1):
            self._start_writer()

    def _answers_coming(self) -> bool:
        """A job of this run was seen answered, or the coordinator has a batch or a call in flight
        or settled answers since this driver's first snapshot (it may have served earlier runs)."""
        if self._counts[JobStatus.ANSWERED]:
            return True
        taken = self._snapshot
        if taken is None:
            return False
        in_flight = taken.active_batches or taken.sync_in_flight
        return bool(in_flight) or taken.settled > (self._first_settled or 0)

    def _start_writer(self) -> None:
        self._writers_started += 1
        self._more_writers = self._parts.start_writer()

    def _grow_writers(self) -> None:
        """Another writer once answered jobs waited ``writer_grow_seconds`` with every writer busy,
        or at once when GROW_NOW_JOBS of them wait: a small run keeps one writer's process and
        memory, a backlog has RESULT_WORKERS as soon as it is there."""
        short = self._more_writers and self._parts.writers.short_of_writers(self._candidates)
        now = self._monotonic()
        if not short:
            self._short_since = None
        elif self._short_since is None:
            self._short_since = now
        waited = self._short_since is not None and now - self._short_since >= self._grow_seconds
        if short and (waited or len(self._candidates) >= GROW_NOW_JOBS):
            self._short_since = None
            self._start_writer()

    def _preparing_nothing(self) -> bool:
        intake = self._parts.intake
        return self._parts.scheduler.idle and not self._queue and (intake is None or intake.finished)

    def _watch(self) -> None:
        """Say what the run waits for when nothing has moved for a while (a long batch, or a fault)."""
        moved = (tuple(sorted(self._counts.items())), self._parts.scheduler.pages_prepared)
        now = self._monotonic()
        if moved != self._last_move:
            self._last_move, self._moved_at = moved, now
            return
        if now - self._moved_at < STALL_SECONDS:
            return
        self._moved_at = now
        live = [f"job {j} {s.value}" for j, s in self._seen.items() if not s.terminal][:50]
        log.warning(
            "no progress for %.0f s; waiting on %s; coordinator: %s; writers running: %d",
            STALL_SECONDS,
            ", ".join(live),
            self._snapshot,
            len(self._parts.writers.leases),
        )

    def _offer(self, ready: list[ReadyJob]) -> None:
        """Hand the jobs prepared in this step to the coordinator, in one call."""
        if not ready:
            return
        for job in ready:
            self._offered[job.job_id] = job
            if job.job_id in self._seen:
                self._see(job.job_id, JobStatus.PREPARED)
        self._send(self._coordinator.offer_all, ready)

    def _flush(self) -> None:
        """Tell the coordinator when no more work is coming soon (sent on change, and now and then)."""
        idle = self._preparing_nothing()
        if idle != self._flushing or self._monotonic() - self._sent_flush >= FLUSH_SECONDS:
            self._flushing, self._sent_flush = idle, self._monotonic()
            self._send(self._coordinator.flush, idle)

    def _forget(self) -> None:
        if self._to_forget:
            done, self._to_forget = self._to_forget, []
            self._send(self._coordinator.forget, done)

    def _send(self, call: Callable[P, Any], *args: P.args, **kwargs: P.kwargs) -> None:
        """Send a call to the coordinator without waiting for it; its outcome is checked later."""
        try:
            self._sent.append(call(*args, **kwargs))
        except RayActorError as exc:
            self._reconnect(exc)

    def _check_sent(self) -> None:
        """The calls the coordinator has answered, oldest first; if it died, fetch it again
        (restarted or new) and offer everything again."""
        while self._sent and self._parts.ready(self._sent[0]):
            ref = self._sent.pop(0)
            try:
                self._parts.call(ref)
            except RayActorError as exc:
                self._reconnect(exc)

    def _refresh_snapshot(self) -> None:
        """Take the coordinator's snapshot when it is there, without waiting: the first steps
        prepare while the actor is still starting. One is always asked for; it comes once the
        coordinator settled answered jobs, or after SNAPSHOT_SECONDS: the step it wakes admits them
        to the writers at once (not at the next look, which left a run's last answers waiting)."""
        try:
            if self._snapshot_ref is None:
                if self._monotonic() < self._snapshot_again_at:
                    return
                self._ask_snapshot()
            if not self._parts.ready(self._snapshot_ref):
                return
            ref, self._snapshot_ref = self._snapshot_ref, None
            self._take_snapshot(self._parts.call(ref))
        except RayActorError as exc:
            self._snapshot_ref = None
            self._reconnect(exc)
            return
        except TransientError as exc:  # its database away (Ray raises a task's error as its cause's type)
            self._snapshot_ref = None
            self._snapshot_again_at = self._monotonic() + SNAPSHOT_SECONDS  # the last one serves meanwhile
            log.info("the coordinator's snapshot failed, asked again in %.2f s: %s", SNAPSHOT_SECONDS, exc)
            return
        if self._snapshot.stopped:  # e.g. the API key was rejected: no job can be sent any more
            log.error("the run stops: %s", self._snapshot.stopped)
            raise AuthenticationFailed(self._snapshot.stopped)
        if self._snapshot.offered_jobs == 0 and self._holding():
            self._offer_again()

    def _take_snapshot(self, taken: Any) -> None:
        seen = self._snapshot.settled if self._snapshot is not None else 0
        held = self._monotonic() - self._snapshot_asked_at >= SNAPSHOT_SECONDS / 2
        self._snapshot = taken
        if self._first_settled is None:
            self._first_settled = taken.settled
        if taken.settled != seen:
            self._asked_answered = -1e9  # look for the answered jobs now
        if taken.settled != seen or held:
            # The coordinator held the call until it settled more or its wait ran out: the next
            # one is asked now, so the wait below wakes when it settles more (not a tick later).
            self._ask_snapshot()

    def _ask_snapshot(self) -> None:
        settled = self._snapshot.settled if self._snapshot is not None else -1
        self._snapshot_ref = self._coordinator.snapshot(settled, SNAPSHOT_SECONDS)
        self._snapshot_asked_at = self._monotonic()

    def _offer_again(self) -> None:
        """The coordinator holds none of the offers this driver holds. Restarted in place by Ray
        between two calls, it lost them without an error; or it answered them all since this driver
        last looked (the usual case on a run's last batches): those jobs are looked at first, since
        offering them all again costs both sides."""
        with contextlib.suppress(RaybatchError):  # the database away: offering again is harmless
            self._look(list(self._offered))
        if not self._holding():
            return
        log.info("the coordinator holds none of this driver's offers; offering them again")
        try:
            self._reoffer_all()
        except RayActorError as exc:  # it died since the snapshot (e.g. its owner let it go)
            self._reconnect(exc)

    def _holding(self) -> bool:
        """Whether the coordinator should hold an offer of this driver (prepared, not yet submitted;
        a submitted job needs its payloads again only after it came back to prepared)."""
        return any(self._seen.get(job_id) is JobStatus.PREPARED for job_id in self._offered)

    def _reconnect(self, exc: RayActorError) -> None:
        """Fetch the named coordinator again until a live one takes every offer this driver holds.

        A handle fetched right after a death may still be the dead actor's: it fails at once, and
        the next fetch (after a short pause) finds the restarted or new actor.
        """
        self._sent.clear()  # sent to the dead actor: what matters is offered again below
        log.warning("coordinator unavailable (%s); reconnecting", type(exc).__name__)

        def fetch() -> None:
            self._coordinator = CoordinatorHandle(self._parts.coordinator())
            self._reoffer_all()

        def again(exc: RayActorError, attempt: int, waited: float) -> None:
            log.warning("coordinator unavailable (%s); reconnecting", type(exc).__name__)

        retrying(
            fetch,
            backoff=RECONNECT_BACKOFF,
            retry_on=RayActorError,
            on_retry=again,
            sleep=self._sleep,
            monotonic=self._monotonic,
        )
        self._flushing = None

    def _reoffer_all(self) -> None:
        if self._offered:
            self._parts.call(self._coordinator.offer_all(list(self._offered.values())))

    def _renew_leases(self) -> None:
        """Every lease this driver holds, renewed in one statement."""
        if self._monotonic() - self._last_renew < self._lease_seconds / 4:
            return
        self._last_renew = self._monotonic()
        held = self._parts.scheduler.leases + self._parts.writers.leases
        offered = [j for j in self._offered if self._seen.get(j) is JobStatus.PREPARED]
        try:
            renewed = self._state.renew_leases(held, self._lease_seconds)
            # Offered jobs waiting for a batch are held too: another driver must not prepare them again.
            holder = self._parts.scheduler.worker_id
            self._state.hold_jobs(holder, offered, JobStatus.PREPARED, self._lease_seconds)
        except RaybatchError as exc:  # the database is away: try again at the next step
            log.warning("could not renew leases: %s", exc)
            return
        by_job: dict[int, Lease] = {lease.job_id: lease for lease in renewed}
        self._parts.scheduler.renewed(by_job)
        for lease in self._parts.writers.leases:
            if lease.job_id not in by_job:  # mostly a write that just ended and released it
                log.info("job %d: write lease not renewed", lease.job_id)
        self._parts.writers.renewed(by_job)

    def _parked(self) -> str | None:
        """Why sending is parked, if it is (read at most once a second)."""
        if self._monotonic() - self._parked_at >= PARKED_SECONDS:
            self._parked_at, self._parked_why = self._monotonic(), parked_reason(self._state)
        return self._parked_why

    def _progress(self) -> Progress:
        snapshot = self._snapshot
        return Progress(
            total=len(self._seen),
            by_status={s.value: n for s, n in self._counts.items() if n},
            pages_total=self._pages_total,
            pages_prepared=self._parts.scheduler.pages_prepared,
            documents=self._documents,
            review_pending=self._review_pending,
            active_batches=snapshot.active_batches if snapshot else 0,
            writer_mb=self._parts.writers.in_flight_mb,
            paused=bool(snapshot and snapshot.paused),
            elapsed=self._monotonic() - self._started,
            parked=self._parked(),
            pages_from_store=self._parts.scheduler.pages_from_store,
            urgent_total=len(self._urgent),
            urgent_done=sum(1 for j in self._urgent if self._seen[j].terminal),
        )


# Once answered, a job's prepared payloads are never needed again.
_PAST_PAYLOADS = (JobStatus.ANSWERED, JobStatus.WRITING, *TERMINAL_JOB_STATUSES)
