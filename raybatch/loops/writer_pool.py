"""WriterPool: the driver's dispatcher for the result-writer actors.

A job is admitted to an idle writer only while the source MB in flight plus its own stay within
MAX_CONCURRENT_MB — or when nothing is in flight, so a job larger than the whole budget still
runs, alone. Jobs are taken in order, urgent ones first: a large job is never starved by smaller
ones behind it. A writer takes work only once Ray has placed it (a second run on a busy cluster may
wait for room for its writers while the first run's writers go on).

Small jobs travel in groups (``raybatch.steps.deal``): one write call carries several, each under
its own lease, and the budget counts every job of every call in flight. Urgent jobs and larger ones
go alone, and so does a job whose group's writer died (a file that kills its writer costs only
itself further tries).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import RayError

from raybatch.errors import LeaseLost, RaybatchError, TimeLimitExceeded, error_class
from raybatch.metrics import Metrics
from raybatch.models import JobRecord, JobStatus, Lease, Priority
from raybatch.state.port import JobStates
from raybatch.steps import deal as dealing
from raybatch.steps.deal import Dealt, deal
from raybatch.units import MIB
from raybatch.work.writer import WriteReport

log = logging.getLogger(__name__)
URGENT = Priority.URGENT


def _restart_writer(writer: Any) -> None:
    """Kill a writer actor so that Ray restarts it (its ``max_restarts`` allows it)."""
    try:
        ray.kill(writer, no_restart=False)
    except (RayError, ValueError) as exc:
        log.warning("could not restart a writer: %s", exc)


def _ready_call(writer: Any) -> Any:
    """A call that ends once the actor is up."""
    return writer.__ray_ready__.remote()


def admissible(in_flight_mb: float, size_mb: float, budget_mb: float, running: int) -> bool:
    """May a job of ``size_mb`` start now?"""
    return running == 0 or in_flight_mb + size_mb <= budget_mb


def _order(job: JobRecord) -> tuple[bool, int]:
    """The order jobs are written in: urgent first, then by id."""
    return job.priority is not URGENT, job.id


@dataclass
class _Running:
    """One write call in flight: its writer and the jobs it carries, in order."""

    writer: Any
    leases: list[Lease]
    sizes_mb: list[float] = field(default_factory=list)
    started: float = 0.0  # monotonic

    @property
    def size_mb(self) -> float:
        return sum(self.sizes_mb)


class WriterPool:
    """Admits answered jobs to idle writers under the MB budget and collects their reports."""

    def __init__(
        self,
        writers: Sequence[Any],
        state: JobStates,
        *,
        budget_mb: float,
        worker_id: str,
        lease_seconds: float,
        max_attempts: int,
        metrics: Metrics | None = None,
        wait: Callable[..., tuple[list[Any], list[Any]]] = ray.wait,
        get: Callable[[Any], Any] = ray.get,
        timeout: float | None = None,
        kill: Callable[[Any], None] | None = None,
        probe: Callable[[Any], Any] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        placed_check: bool = False,
    ) -> None:
        self._idle: list[Any] = []
        self._timeout = timeout  # WRITE_TIMEOUT: seconds one write may take
        self._kill = kill or _restart_writer
        self._probe = probe or _ready_call
        self._restarting: dict[Any, Any] = {}  # a restarted writer → its readiness call, or None
        self._monotonic = monotonic
        self._wait, self._get = wait, get
        self._state = state
        self._budget_mb = budget_mb
        self._worker_id = worker_id
        self._lease_seconds = lease_seconds
        self._max_attempts = max_attempts
        self._metrics = metrics or Metrics()
        self._running: dict[Any, _Running] = {}
        self._carried: set[int] = set()  # the jobs of the calls running (``holds`` at every glance)
        self.reports: list[WriteReport] = []
        self.gone: set[int] = set()  # jobs the last admit found no longer to be written by this pool
        self._alone: set[int] = set()  # jobs whose group's writer died: each goes alone next time
        self._placed_check = placed_check
        self._placing: dict[int, Any] = {}
        self.grow(writers)

    def grow(self, writers: Sequence[Any]) -> None:
        """Writers that join the pool (started later than the pool)."""
        self._idle += writers
        if self._placed_check:
            self._placing |= {id(w): w.__ray_ready__.remote() for w in writers}

    def _placed(self) -> list[Any]:
        """The idle writers Ray has placed (a call to one still waiting for room would wait too)."""
        if self._placing:
            done, _ = self._wait(list(self._placing.values()), num_returns=len(self._placing), timeout=0)
            self._placing = {k: ref for k, ref in self._placing.items() if ref not in done}
        return [w for w in self._idle if id(w) not in self._placing]

    @property
    def in_flight_mb(self) -> float:
        return sum(r.size_mb for r in self._running.values())

    @property
    def busy(self) -> bool:
        return bool(self._running)

    @property
    def leases(self) -> list[Lease]:
        return [lease for r in self._running.values() for lease in r.leases]

    @property
    def refs(self) -> list[Any]:
        """The writes in flight: one is done when its writer is free again."""
        return list(self._running)

    @property
    def idle_count(self) -> int:
        return len(self._placed())

    def short_of_writers(self, answered: Sequence[JobRecord]) -> bool:
        """True when every writer is busy (none is still being placed or restarted) and the next of
        ``answered`` would be admitted under the budget if one were free, or a call carries several
        jobs (they ride together for want of writers): another writer would have work at once."""
        if self._placed() or self._placing or self._restarting or not self._running:
            return False
        if any(len(running.leases) > 1 for running in self._running.values()):
            return True
        skip = self._taken()
        waiting = [j for j in answered if j.id not in skip]
        if not waiting:
            return False
        first = min(waiting, key=_order)
        return admissible(self.in_flight_mb, first.size_bytes / MIB, self._budget_mb, len(self._running))

    def _taken(self) -> set[int]:
        """Jobs not to admit: the ones being written, and the ones another driver took."""
        return {lease.job_id for lease in self.leases} | self.gone

    def holds(self, job_id: int) -> bool:
        """True while one of the writers writes this job."""
        return job_id in self._carried

    def renewed(self, leases: dict[int, Lease]) -> None:
        """Take the renewed leases (same tokens, later expiry)."""
        for running in self._running.values():
            running.leases = [leases.get(lease.job_id, lease) for lease in running.leases]

    def tick(self, answered: Sequence[JobRecord]) -> list[WriteReport]:
        """Collect finished writes, then admit jobs in order while the budget allows."""
        finished = self.collect()
        self.admit(answered)
        return finished

    def admit(self, answered: Sequence[JobRecord]) -> list[int]:
        """Admit jobs (urgent first, then in id order) while a writer is idle and the budget allows:
        answered ones, and ones a dead driver was writing (their expired lease lets the claim
        through); their ids. The jobs chosen, for all idle writers, are claimed in one statement;
        those another driver took meanwhile go to ``gone`` and the next ones are chosen in their place."""
        self.gone = set()
        admitted: list[int] = []
        while calls := self._choose(answered):
            chosen = [dealt.job.id for call in calls for dealt in call]
            leases = self._claim(chosen)
            for call in calls:
                admitted += self._start([(leases[d.job.id], d.size_mb) for d in call if d.job.id in leases])
            lost = set(chosen) - set(admitted)
            if not lost:
                break
            self.gone |= lost
        self._metrics.writer_mb_in_flight(self.in_flight_mb)
        return admitted

    def _choose(self, answered: Sequence[JobRecord]) -> list[list[Dealt[JobRecord]]]:
        """The jobs the idle writers may take now, in order, within the budget (every job counts),
        dealt into one call per writer."""
        skip = self._taken()
        picked: list[Dealt[JobRecord]] = []
        free, in_flight_mb, running = len(self._placed()), self.in_flight_mb, len(self._running)
        for job in sorted(answered, key=_order):
            if len(picked) >= free * dealing.GROUP_JOBS:
                break
            if job.id in skip:
                continue
            size_mb = job.size_bytes / MIB
            if not admissible(in_flight_mb, size_mb, self._budget_mb, running):
                break
            picked.append(Dealt(job, size_mb, alone=job.priority is URGENT or job.id in self._alone))
            in_flight_mb, running = in_flight_mb + size_mb, running + 1
        return deal(picked, free)

    def drain(self, timeout: float = 60.0) -> list[WriteReport]:
        """Wait for the writes still running (their jobs have ended) and collect their reports."""
        if self._running:
            self._wait(list(self._running), num_returns=len(self._running), timeout=timeout)
        return self.collect()

    def hand_back(self) -> list[int]:
        """Give back every write still running (a drain past its bound): each job goes back to
        answered at once, the try not counted, and its writer, fenced by the lease it lost, stops
        at its next object; the jobs handed back."""
        handed = []
        for ref in list(self._running):
            running = self._ended_call(ref)
            for lease in running.leases:
                self._release(lease, attempts=max(0, lease.attempt - 1))
                handed.append(lease.job_id)
        return handed

    def _claim(self, job_ids: list[int]) -> dict[int, Lease]:
        """Claim these jobs for writing, in one statement; the leases of those won."""
        leases = self._state.claim_jobs(
            worker_id=self._worker_id,
            from_statuses=[JobStatus.ANSWERED],
            to_status=JobStatus.WRITING,
            lease_seconds=self._lease_seconds,
            limit=len(job_ids),
            job_ids=job_ids,
        )
        return {lease.job_id: lease for lease in leases}

    def _start(self, group: list[tuple[Lease, float]]) -> list[int]:
        """Hand claimed jobs to an idle writer, in one call; a job past its tries fails instead.
        The jobs started."""
        started = []
        for lease, size_mb in group:
            if lease.attempt <= self._max_attempts:
                started.append((lease, size_mb))
                continue
            reason = f"writing failed {lease.attempt - 1} times"
            with contextlib.suppress(LeaseLost):  # canceled since the claim: the cancel stands
                self._state.fail_job(lease.job_id, "write", "AttemptsExhausted", reason, lease=lease)
        if not started:
            return []
        writer = self._idle.pop(self._idle.index(self._placed()[0]))
        leases, sizes = [lease for lease, _ in started], [mb for _, mb in started]
        self._running[writer.write_group.remote(leases)] = _Running(writer, leases, sizes, self._monotonic())
        self._carried.update(lease.job_id for lease in leases)
        self._alone.difference_update(lease.job_id for lease in leases)
        return [lease.job_id for lease in leases]

    def collect(self) -> list[WriteReport]:
        """The writes that ended since the last call; their writers are idle again."""
        finished = self._expire()
        if not self._running:
            return finished
        done, _ = self._wait(list(self._running), num_returns=len(self._running), timeout=0)
        for ref in done:
            running = self._ended_call(ref)
            try:
                reports: list[WriteReport] = self._get(ref)
            except RayError as exc:  # the writer process died: its jobs go back to be written again
                reports = self._died(running, exc)
            else:
                self._idle.append(running.writer)
            finished += reports
            self.reports += reports
        return finished

    def _ended_call(self, ref: Any) -> _Running:
        """A write call no longer waited for: its jobs are no longer this pool's to hold."""
        running = self._running.pop(ref)
        self._carried.difference_update(lease.job_id for lease in running.leases)
        return running

    def _died(self, running: _Running, exc: RayError) -> list[WriteReport]:
        """A write call whose writer died: the jobs it had not ended go back to answered (each
        alone next time, if it was in a group); the ones it ended (failed, say) are reported."""
        ids = [lease.job_id for lease in running.leases]
        log.warning("writer died on jobs %s: %s", ids, error_class(exc))
        for lease in running.leases:
            self._release(lease)
        if len(ids) > 1:
            self._alone.update(ids)
        # Ray restarts it; a call sent meanwhile would fail too, and cost its jobs a try.
        self._restarting[running.writer] = None
        return self._ended(running)

    def _ended(self, running: _Running) -> list[WriteReport]:
        """Reports for the jobs of a call that ended before it was stopped (its writer died, or it
        ran out of time): they are no longer being written."""
        try:
            statuses = self._state.job_statuses(lease.job_id for lease in running.leases)
        except RaybatchError:  # the database is away: the driver's sweep learns how they ended
            return []
        now = time.time()
        return [
            WriteReport(lease.job_id, statuses[lease.job_id], mb, now, now, 0, 0.0)
            for lease, mb in zip(running.leases, running.sizes_mb, strict=True)
            if lease.job_id in statuses and statuses[lease.job_id].terminal
        ]

    def _rejoin(self) -> None:
        """A restarted writer takes work again once it answers: a call sent while Ray restarts
        it would fail, and cost its job a try."""
        for writer, probe in list(self._restarting.items()):
            if probe is None:
                self._restarting[writer] = self._probe(writer)
                continue
            done, _ = self._wait([probe], num_returns=1, timeout=0)
            if not done:
                continue
            try:
                self._get(probe)
            except RayError:  # not up yet: ask again
                self._restarting[writer] = None
                continue
            del self._restarting[writer]
            self._idle.append(writer)

    def _expire(self) -> list[WriteReport]:
        """Writes running past WRITE_TIMEOUT a job (a hung upload or slice): the writer is restarted
        (the only way to stop a call in flight) and each job not ended goes back to answered for
        another try, alone if it was in a group, or fails ``TimeLimitExceeded`` on its last one."""
        self._rejoin()
        if self._timeout is None:
            return []
        now = self._monotonic()
        reports = []
        for ref, running in list(self._running.items()):
            if now - running.started <= self._timeout * len(running.leases):  # the limit is per job
                continue
            self._ended_call(ref)
            self._kill(running.writer)
            self._restarting[running.writer] = None  # restarted by Ray
            ended = self._ended(running)
            done = {report.job_id for report in ended}
            left = zip(running.leases, running.sizes_mb, strict=True)
            reports += ended + [self._time_out(lease, mb) for lease, mb in left if lease.job_id not in done]
            if len(running.leases) > 1:  # the one that hung costs the others no second wait
                self._alone.update(lease.job_id for lease in running.leases)
        self.reports += reports
        return reports

    def _time_out(self, lease: Lease, size_mb: float) -> WriteReport:
        limit = f"WRITE_TIMEOUT ({self._timeout:g} s)"
        status = JobStatus.ANSWERED
        try:
            if lease.attempt >= self._max_attempts:
                reason = f"writing ran past {limit} on each of {lease.attempt} tries"
                self._state.fail_job(lease.job_id, "write", TimeLimitExceeded.__name__, reason, lease=lease)
                status = JobStatus.FAILED
            else:
                reason = f"writing ran past {limit}; the writer was restarted and the job goes again"
                self._state.transition(lease.job_id, [JobStatus.WRITING], JobStatus.ANSWERED, lease=lease)
        except RaybatchError as exc:  # the database is away: the lease expires and frees the job
            reason = f"writing ran past {limit}; could not record it: {exc}"
        now = time.time()
        error = f"{TimeLimitExceeded.__name__}: {reason}"
        return WriteReport(lease.job_id, status, size_mb, now, now, 0, 0.0, error)

    def _release(self, lease: Lease, **fields: int) -> None:
        try:
            self._state.transition(
                lease.job_id, [JobStatus.WRITING], JobStatus.ANSWERED, lease=lease, **fields
            )
        except RaybatchError as exc:
            log.warning("job %d: could not release it after a writer died: %s", lease.job_id, exc)
