"""Driver: the loop that carries one run's jobs from pending to completed on Ray.

Each tick: claim pending jobs and keep prepare tasks in flight (bounded by the coordinator's
backlog), offer prepared jobs to the coordinator, admit answered jobs to the writers, renew leases,
and report progress. The coordinator and the writers may die and come back: the DB says where every
job stands, and the driver re-offers the prepared payloads it owns.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ray.exceptions import RayActorError

from raybatch.actors.dispatch import WriterPool
from raybatch.actors.scheduler import PrepareScheduler, ReadyJob
from raybatch.errors import RaybatchError
from raybatch.models import TERMINAL_JOB_STATUSES, JobRecord, JobStatus, Lease
from raybatch.spend import parked_reason
from raybatch.state.port import StateStore

log = logging.getLogger(__name__)

STALL_SECONDS = 120.0  # say what the run waits for after this long without any change



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

    @property
    def done(self) -> int:
        return sum(self.by_status.get(s.value, 0) for s in TERMINAL_JOB_STATUSES)


@dataclass
class DriverParts:
    """What the driver drives: built by the pipeline from Ray, or by tests from stand-ins."""

    scheduler: PrepareScheduler
    writers: WriterPool
    coordinator: Callable[[], Any]  # returns a handle; called again after the actor died
    call: Callable[[Any], Any] = field(default=lambda ref: ref)  # ray.get in production
    ready: Callable[[Any], bool] = field(default=lambda ref: True)  # is a result there (ray.wait)


class Driver:
    """Runs the tick loop for the jobs of one run until each one ended."""

    def __init__(
        self,
        state: StateStore,
        job_ids: Sequence[int],
        parts: DriverParts,
        *,
        lease_seconds: float = 60.0,
        tick_seconds: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._state = state
        self._job_ids = list(dict.fromkeys(job_ids))
        self._parts = parts
        self._lease_seconds = lease_seconds
        self._tick_seconds = tick_seconds
        self._sleep = sleep
        self._monotonic = monotonic
        self._coordinator = parts.coordinator()
        self._offered: dict[int, ReadyJob] = {}
        self._last_renew = monotonic()
        self._started = monotonic()
        self._documents = 0
        self._snapshot: Any = None
        self._last_move: Any = None
        self._moved_at = monotonic()
        self._snapshot_ref: Any = None

    def run(self, on_progress: Callable[[Progress], None] | None = None) -> list[JobRecord]:
        """Tick until every job of the run ended; returns the jobs as they ended."""
        while True:
            jobs = self._jobs()
            if all(j.status in TERMINAL_JOB_STATUSES for j in jobs):
                self._documents += sum(r.documents for r in self._parts.writers.drain())
                if on_progress is not None:
                    on_progress(self._progress(jobs))
                return jobs
            self._tick(jobs)
            if on_progress is not None:
                on_progress(self._progress(jobs))
            self._watch(jobs)
            self._sleep(self._tick_seconds)

    def _watch(self, jobs: Sequence[JobRecord]) -> None:
        """Say what the run waits for when nothing has moved for a while (a long batch, or a fault)."""
        moved = (tuple((j.id, j.status, j.progress) for j in jobs), self._parts.scheduler.pages_prepared)
        now = self._monotonic()
        if moved != self._last_move:
            self._last_move, self._moved_at = moved, now
            return
        if now - self._moved_at < STALL_SECONDS:
            return
        self._moved_at = now
        live = [j for j in jobs if not j.status.terminal]
        waiting = ", ".join(f"job {j.id} {j.status.value} {j.progress:.0f}%" for j in live)
        snapshot = self._snapshot
        log.warning(
            "no progress for %.0f s; waiting on %s; coordinator: %s; writers running: %d",
            STALL_SECONDS, waiting[:2000], snapshot, len(self._parts.writers.leases),
        )

    def _tick(self, jobs: list[JobRecord]) -> None:
        by_status = _group(jobs)
        self._reoffer_or_reprepare(by_status.get(JobStatus.PREPARED, []))
        # Pending jobs, and jobs a dead driver was preparing (claimed once its lease expired).
        unclaimed = by_status.get(JobStatus.PENDING, []) + by_status.get(JobStatus.PREPARING, [])
        self._parts.scheduler.claim(j.id for j in unclaimed if not self._parts.scheduler.holds(j.id))
        self._refresh_snapshot()
        backlog = self._snapshot.pending_bytes if self._snapshot else 0
        for ready in self._parts.scheduler.tick(backlog):
            self._offer(ready)
        self._call("flush", self._parts.scheduler.idle)
        writable = by_status.get(JobStatus.ANSWERED, []) + by_status.get(JobStatus.WRITING, [])
        for report in self._parts.writers.tick(writable):
            self._documents += report.documents
            if report.error:
                log.warning("job %d: %s", report.job_id, report.error)
        self._forget_finished(jobs)
        self._renew_leases()

    # --- the coordinator ------------------------------------------------------------------
    def _offer(self, ready: ReadyJob) -> None:
        self._offered[ready.job_id] = ready
        self._call("offer", ready.job_id, dict(ready.payloads), ready.mode, ready.request_bytes)

    def _reoffer_or_reprepare(self, prepared: Sequence[JobRecord]) -> None:
        """Prepared jobs whose payloads this driver does not hold (a restart) are prepared again."""
        for job in prepared:
            if job.id not in self._offered:
                self._state.transition(job.id, [JobStatus.PREPARED], JobStatus.PENDING)
                log.info("job %d: prepared payloads are gone; preparing it again", job.id)

    def _forget_finished(self, jobs: Sequence[JobRecord]) -> None:
        done = [j.id for j in jobs if j.id in self._offered and j.status in _PAST_PAYLOADS]
        if done:
            for job_id in done:
                del self._offered[job_id]
            self._call("forget", done)

    def _call(self, method: str, *args: Any) -> Any:
        """Call the coordinator; if it died, fetch it again (restarted or new), re-offer, retry."""
        while True:
            try:
                return self._parts.call(getattr(self._coordinator, method).remote(*args))
            except RayActorError as exc:
                self._reconnect(exc)

    def _refresh_snapshot(self) -> None:
        """Take the coordinator's snapshot when it is there, without waiting: the first ticks
        prepare while the actor is still starting."""
        try:
            if self._snapshot_ref is None:
                self._snapshot_ref = self._coordinator.snapshot.remote()
            if not self._parts.ready(self._snapshot_ref):
                return
            ref, self._snapshot_ref = self._snapshot_ref, None
            self._snapshot = self._parts.call(ref)
        except RayActorError as exc:
            self._snapshot_ref = None
            self._reconnect(exc)

    def _reconnect(self, exc: RayActorError) -> None:
        """Fetch the named coordinator again until a live one takes every offer this driver holds.

        A handle fetched right after a death may still be the dead actor's: it fails at once, and
        the next fetch (after a short pause) finds the restarted or new actor.
        """
        for delay in _reconnect_delays():
            log.warning("coordinator unavailable (%s); reconnecting", type(exc).__name__)
            self._sleep(delay)
            try:
                self._coordinator = self._parts.coordinator()
                self._reoffer_all()
                return
            except RayActorError as again:
                exc = again

    def _reoffer_all(self) -> None:
        for ready in list(self._offered.values()):
            args = (ready.job_id, dict(ready.payloads), ready.mode, ready.request_bytes)
            self._parts.call(self._coordinator.offer.remote(*args))

    # --- leases and progress --------------------------------------------------------------
    def _renew_leases(self) -> None:
        if self._monotonic() - self._last_renew < self._lease_seconds / 4:
            return
        self._last_renew = self._monotonic()
        seconds = self._lease_seconds
        self._parts.scheduler.renewed(lambda lease: self._state.renew_lease(lease, seconds))
        renewed: dict[int, Lease] = {}
        for lease in self._parts.writers.leases:
            try:
                renewed[lease.job_id] = self._state.renew_lease(lease, seconds)
            except RaybatchError as exc:
                log.warning("job %d: write lease lost: %s", lease.job_id, exc)
        self._parts.writers.renewed(renewed)

    def _jobs(self) -> list[JobRecord]:
        return self._state.get_jobs(self._job_ids)

    def _progress(self, jobs: Sequence[JobRecord]) -> Progress:
        counts = Counter(j.status.value for j in jobs)
        snapshot = self._snapshot
        return Progress(
            total=len(jobs),
            by_status=dict(counts),
            pages_total=sum(j.pages or 0 for j in jobs),
            pages_prepared=self._parts.scheduler.pages_prepared,
            documents=self._documents,
            active_batches=snapshot.active_batches if snapshot else 0,
            writer_mb=self._parts.writers.in_flight_mb,
            paused=bool(snapshot and snapshot.paused),
            elapsed=self._monotonic() - self._started,
            parked=parked_reason(self._state),
            pages_from_store=self._parts.scheduler.pages_from_store,
        )


# Once answered, a job's prepared payloads are never needed again.
_PAST_PAYLOADS = (JobStatus.ANSWERED, JobStatus.WRITING, *TERMINAL_JOB_STATUSES)


def _reconnect_delays() -> Iterator[float]:
    """No pause before the first fetch, then 0.2 s doubling up to 5 s, for as long as it takes."""
    yield 0.0
    delay = 0.2
    while True:
        yield delay
        delay = min(5.0, delay * 2)


def _group(jobs: Sequence[JobRecord]) -> dict[JobStatus, list[JobRecord]]:
    grouped: dict[JobStatus, list[JobRecord]] = {}
    for job in jobs:
        grouped.setdefault(job.status, []).append(job)
    return grouped
