"""PrepareScheduler: the driver's side of the prepare stage.

Claims pending jobs, plans their chunks, and keeps prepare tasks in flight under two bounds: a cap
on tasks in flight (``ray.wait`` loop) and the coordinator's backlog, so preparation runs at most
about two batches ahead of submission. Resources bound what runs; these bound what is pending.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import ray
from ray.exceptions import RayError, RayTaskError

from raybatch.errors import LeaseLost, RaybatchError, TimeLimitExceeded, TransientError, error_class
from raybatch.metrics import Metrics
from raybatch.models import (
    CachedPage,
    ChunkRecord,
    ChunkStatus,
    JobRecord,
    JobStatus,
    Lease,
    Priority,
    ProcessingMode,
)
from raybatch.reuse import outstanding_of
from raybatch.state.port import JobsWithChunks, PageTexts
from raybatch.steps.chunk import ChunkPlan
from raybatch.work.prepared_chunk import ChunkSummary

log = logging.getLogger(__name__)

GUESS_REQUEST_BYTES = 3_000_000  # until the first chunk is measured: ≈ 8 scanned pages
# A run saves prepared chunks together, in one transaction: once SAVE_JOBS jobs are complete, once
# the oldest waited SAVE_SECONDS, when no task is left in flight, or at once for urgent work.
SAVE_JOBS = 32
SAVE_SECONDS = 0.25
# A run prepares the one-chunk jobs of small local files in groups: one task for up to GROUP_CHUNKS
# of them and GROUP_SOURCE_BYTES of sources, one task of the cap (a task holds one CPU, whatever it
# carries; its memory request counts each chunk). Big jobs, urgent ones and sources read with the
# store's keys get a task per chunk. Each task of a small local file reads it (read and hashed again,
# a few MB cost less than a load task's round trip and its copy through the object store); a larger
# file, or one read with the store's keys, is read once for its job's chunks, by a load task.
GROUP_CHUNKS = 32  # a task's and a result's cost, shared; more would hold back the first chunks
GROUP_SOURCE_BYTES = 4_000_000


class SchedulerState(JobsWithChunks, PageTexts, Protocol):
    """The slices of the state store that preparing jobs uses."""


@dataclass
class JobInPrep:
    """A job being prepared: its lease, the chunks still out, the payloads of those done."""

    job: JobRecord
    lease: Lease
    waiting: set[int]
    payloads: dict[int, Any] = field(default_factory=dict)
    request_bytes: int = 0
    source: Any = None
    # Chunks of it were saved before (an ``estimate`` keeps what it prepared only after saving
    # them): only then is the store asked for what was kept.
    maybe_kept: bool = True


@dataclass
class TaskInFlight:
    """One prepare task: the chunks it prepares as (place in its result, job, plan, payload ref)."""

    items: list[tuple[int, int, ChunkPlan, Any]]
    launched: float
    group: bool = False  # its result is one outcome per chunk (see PrepareTasks.prepare_group)
    from_store: bool = False  # read from the store, not a task: nothing to cancel


@dataclass(frozen=True)
class ReadyJob:
    """A job whose chunks are all prepared: hand its payload handles to the coordinator."""

    job_id: int
    mode: ProcessingMode
    payloads: Mapping[int, Any]
    request_bytes: int


class PrepareTasks(Protocol):
    """Launches the Ray tasks of the prepare stage; returns object refs."""

    def load(self, job: JobRecord) -> Any:
        """A task reading the job's source bytes into the object store."""
        ...

    def prepare(self, job: JobRecord, plan: ChunkPlan, source: Any) -> tuple[Any, Any]:
        """A task preparing one chunk from ``source`` (what ``load`` returned), or reading the
        source itself when it is None (a job's only chunk, or any chunk of a small local file):
        refs to (ChunkSummary, PreparedChunk)."""
        ...

    def prepare_group(self, items: Sequence[tuple[JobRecord, ChunkPlan]]) -> tuple[Any, list[Any]]:
        """One task preparing each (one-chunk job of a local file, plan), reading the sources
        itself: a ref to its outcomes (a ChunkSummary, or the exception that chunk raised, in the
        order of ``items``) and a ref to each chunk's PreparedChunk."""
        ...

    def processing_key(self, job: JobRecord, n: int) -> str:
        """The key chunk ``n`` of ``job`` gets when these tasks prepare it."""
        ...

    def stored(self, job: JobRecord, plan: ChunkPlan) -> tuple[Any, Any] | None:
        """Refs to (ChunkSummary, PreparedChunk) prepared earlier under the same key, or None."""
        ...


class PrepareScheduler:
    """Launches and collects prepare tasks for the jobs of one run."""

    def __init__(
        self,
        state: SchedulerState,
        tasks: PrepareTasks,
        *,
        worker_id: str,
        max_in_flight: int | Callable[[], int],
        max_backlog_bytes: int,
        lease_seconds: float,
        max_attempts: int,
        metrics: Metrics | None = None,
        wait: Callable[..., tuple[list[Any], list[Any]]] = ray.wait,
        get: Callable[[Any], Any] = ray.get,
        timeout: float | None = None,
        cancel: Callable[[Any], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        save_jobs: int = 1,
        save_seconds: float = 0.0,
        group_chunks: int = 1,
    ) -> None:
        self._state = state
        self._group_chunks = group_chunks  # GROUP_CHUNKS in a run
        self._save_jobs, self._save_seconds = save_jobs, save_seconds  # SAVE_JOBS, SAVE_SECONDS in a run
        self._wait, self._get = wait, get
        self._timeout = timeout  # PREPARE_TIMEOUT: seconds a task may take from its launch
        self._cancel = cancel or cancel_task
        self._monotonic = monotonic
        self._tasks = tasks
        self._worker_id = worker_id
        # A callable cap follows the cluster as the autoscaler adds or removes nodes.
        self._cap = max_in_flight if callable(max_in_flight) else (lambda: max_in_flight)
        self._max_backlog = max_backlog_bytes
        self._lease_seconds = lease_seconds
        self._max_attempts = max_attempts
        self._metrics = metrics or Metrics()
        self._jobs: dict[int, JobInPrep] = {}
        self._queue: deque[tuple[int, ChunkPlan]] = deque()
        self._in_flight: dict[Any, TaskInFlight] = {}
        self._alone: set[int] = set()  # jobs of a group task that crashed or hung: prepared alone now
        self._measured: list[int] = []
        self._answered_already: list[ReadyJob] = []  # jobs found fully prepared when claimed
        self._unsaved: list[ChunkRecord] = []  # prepared chunks not yet saved (see SAVE_JOBS)
        self._reads: list[tuple[str, CachedPage]] = []  # OCR reads of their tasks, cached at the save
        self._complete: list[int] = []  # jobs all of whose chunks are among them or saved
        self._unsaved_since: float | None = None
        self._urgent_chunks = 0  # how many chunks at the head of the queue are urgent
        self.pages_from_store = 0  # of pages_prepared: taken as an earlier run had prepared them
        self.pages_prepared = 0

    @property
    def idle(self) -> bool:
        """Nothing queued, running or waiting to be saved."""
        return not self._queue and not self._in_flight and not self._answered_already and not self._unsaved

    def wake_in(self, longest: float) -> float:
        """How long the driver may wait for its next event: less when prepared chunks wait to be saved."""
        if self._unsaved_since is None:
            return longest
        return max(0.0, min(longest, self._unsaved_since + self._save_seconds - self._monotonic()))

    @property
    def worker_id(self) -> str:
        """Who claims: the jobs this scheduler prepared are held under this name."""
        return self._worker_id

    @property
    def leases(self) -> list[Lease]:
        return [prep.lease for prep in self._jobs.values()]

    @property
    def held(self) -> int:
        """How many jobs this scheduler holds (claimed, not yet prepared)."""
        return len(self._jobs)

    @property
    def refs(self) -> list[Any]:
        """The summaries of the tasks in flight: one is done when its chunks are prepared."""
        return list(self._in_flight)

    @property
    def _chunks_in_flight(self) -> int:
        """What the backlog bound counts: every chunk of every task in flight (the cap counts tasks)."""
        return sum(len(task.items) for task in self._in_flight.values())

    def holds(self, job_id: int) -> bool:
        """True while this scheduler prepares the job."""
        return job_id in self._jobs

    def claim(self, job_ids: Iterable[int]) -> int:
        """Claim the pending jobs among ``job_ids`` and queue their chunks; how many were claimed.

        The caller bounds ``job_ids`` (a window): a claim never reaches past them.
        """
        ids = list(job_ids)
        if not ids:
            return 0
        claimed = self._state.claim_job_records(
            worker_id=self._worker_id,
            from_statuses=[JobStatus.PENDING],
            to_status=JobStatus.PREPARING,
            lease_seconds=self._lease_seconds,
            limit=len(ids),
            job_ids=ids,
        )
        leases = [lease for lease, _ in claimed]
        jobs = {job.id: job for _, job in claimed}
        answered = self._state.chunk_counts(list(jobs)) if leases else {}
        startable = [lease for lease in leases if self._within_attempts(jobs[lease.job_id], lease)]
        has_answers = [
            (jobs[lease.job_id], answered.get(lease.job_id, {}).get(ChunkStatus.SUCCEEDED, 0) > 0)
            for lease in startable
        ]
        plans = outstanding_of(self._state, has_answers, self._tasks.processing_key)
        for lease in startable:
            self._start(jobs[lease.job_id], lease, plans[lease.job_id], lease.job_id in answered)
        return len(leases)

    def renewed(self, leases: Mapping[int, Lease]) -> None:
        """Take the renewed leases; a job whose lease is not among them was taken over: dropped."""
        for job_id, prep in list(self._jobs.items()):
            if job_id in leases:
                prep.lease = leases[job_id]
            else:
                log.warning("job %d: lease lost while preparing; dropped", job_id)
                self._drop(job_id)

    def tick(self, backlog_bytes: int) -> list[ReadyJob]:
        """Collect what finished, launch what the bounds allow, then save what is prepared when
        due; the jobs now fully prepared."""
        # Collecting first refills a finished task's slot in this tick rather than the next one;
        # the jobs handed back are not offered yet, so their bytes count as backlog here. Saving
        # after the launches knows whether anything else is still being prepared.
        self._expire()
        self._collect()
        ready, self._answered_already = self._answered_already, []
        self._launch(backlog_bytes + sum(job.request_bytes for job in ready))
        return ready + self._save()

    def _within_attempts(self, job: JobRecord, lease: Lease) -> bool:
        if lease.attempt <= self._max_attempts:
            return True
        reason = f"prepare tried {lease.attempt - 1} times (workers killed or lost, e.g. out of memory)"
        self._fail_held(job.id, lease, "AttemptsExhausted", reason)
        return False

    def _start(self, job: JobRecord, lease: Lease, plans: list[ChunkPlan], has_chunks: bool) -> None:
        self._jobs[job.id] = JobInPrep(job, lease, {p.n for p in plans}, maybe_kept=has_chunks)
        if job.priority is Priority.URGENT:  # ahead of every normal job's chunks
            self._urgent_chunks += len(plans)
            self._queue.extendleft((job.id, plan) for plan in reversed(plans))
        else:
            self._queue.extend((job.id, plan) for plan in plans)
        if not plans:  # every answer is already held: nothing to prepare, ready at the next tick
            ready = self._finish(job.id)
            self._answered_already.extend([ready] if ready else [])

    def _launch(self, backlog_bytes: int) -> None:
        cap = max(1, self._cap())
        while self._queue and len(self._in_flight) < cap:
            # Urgent chunks are sent at once, synchronously: the batch backlog does not hold them.
            if not self._urgent_chunks and backlog_bytes + self._expected_bytes() >= self._max_backlog:
                return
            job_id, plan = self._queue.popleft()
            self._urgent_chunks = max(0, self._urgent_chunks - 1)
            prep = self._jobs.get(job_id)
            if prep is None or self._from_kept(prep, plan):
                continue
            if self._groupable(prep):
                self._launch_group([(prep, plan)], backlog_bytes)
            else:
                self._launch_one(prep, plan)

    def _from_kept(self, prep: JobInPrep, plan: ChunkPlan) -> bool:
        """Take the chunk as an earlier ``estimate`` kept it, if it did."""
        stored = self._tasks.stored(prep.job, plan) if prep.maybe_kept else None
        if stored is None:
            return False
        summary, payload = stored
        self._in_flight[summary] = TaskInFlight(
            [(0, prep.job.id, plan, payload)], self._monotonic(), from_store=True
        )
        return True

    def _launch_one(self, prep: JobInPrep, plan: ChunkPlan) -> None:
        if prep.source is None and len(prep.waiting) > 1 and not _small_local(prep.job):
            prep.source = self._tasks.load(prep.job)  # read once for the job's chunks
        summary, payload = self._tasks.prepare(prep.job, plan, prep.source)
        self._in_flight[summary] = TaskInFlight([(0, prep.job.id, plan, payload)], self._monotonic())

    def _groupable(self, prep: JobInPrep) -> bool:
        """A normal one-chunk job of a small local file (an S3 source is read by a task holding
        the store's keys), not sent back to be prepared alone."""
        job = prep.job
        return (
            self._group_chunks > 1
            and len(prep.waiting) == 1
            and job.priority is not Priority.URGENT
            and _small_local(job)
            and job.id not in self._alone
        )

    def _launch_group(self, group: list[tuple[JobInPrep, ChunkPlan]], backlog_bytes: int) -> None:
        """Add the queued chunks that may join the first one, within the bounds; one task for them."""
        sources = group[0][0].job.size_bytes
        while len(group) < self._group_chunks and self._queue and not self._urgent_chunks:
            job_id, plan = self._queue[0]
            prep = self._jobs.get(job_id)
            if prep is not None and not self._groupable(prep):
                break
            if backlog_bytes + self._expected_bytes(len(group) + 1) >= self._max_backlog:
                break
            if prep is not None and sources + prep.job.size_bytes > GROUP_SOURCE_BYTES:
                break
            self._queue.popleft()
            if prep is not None and not self._from_kept(prep, plan):
                group.append((prep, plan))
                sources += prep.job.size_bytes
        if len(group) == 1:
            self._launch_one(*group[0])
            return
        outcomes, payloads = self._tasks.prepare_group([(prep.job, plan) for prep, plan in group])
        items = [(i, prep.job.id, plan, payloads[i]) for i, (prep, plan) in enumerate(group)]
        self._in_flight[outcomes] = TaskInFlight(items, self._monotonic(), group=True)

    def _expected_bytes(self, more: int = 0) -> int:
        """Bytes the chunks in flight (and ``more``) will add to the backlog, by the sizes measured so far."""
        recent = self._measured[-20:]
        each = sum(recent) // len(recent) if recent else GUESS_REQUEST_BYTES
        return each * (self._chunks_in_flight + more)

    def _collect(self) -> None:
        """The chunks prepared since the last look, held to be saved with the jobs they complete
        in one transaction (not one per chunk and one per job)."""
        if not self._in_flight:
            return
        done, _ = self._wait(list(self._in_flight), num_returns=len(self._in_flight), timeout=0)
        chunks: list[ChunkRecord] = []
        complete: list[int] = []
        for ref in done:
            task = self._in_flight.pop(ref)
            items = [item for item in task.items if item[1] in self._jobs]  # not those failed or dropped
            if not items:
                continue
            try:
                result = self._get(ref)
            except RayError as exc:
                if task.group:  # a worker crashed or the task died: which chunk did it is unknown
                    self._prepare_alone(items)
                else:
                    self._fail(items[0][1], exc)
                continue
            outcomes: list[ChunkSummary | BaseException] = result if task.group else [result]
            for i, job_id, plan, payload in items:
                outcome = outcomes[i]
                if isinstance(outcome, BaseException):  # one broken file of a group: its job alone fails
                    self._fail(job_id, outcome)
                    continue
                chunks.append(outcome.record)
                if self._chunk_done(job_id, plan.n, outcome, payload, task.from_store):
                    complete.append(job_id)
        if chunks and self._unsaved_since is None:
            self._unsaved_since = self._monotonic()
        self._unsaved += chunks
        self._complete += complete

    def _prepare_alone(self, items: Sequence[tuple[int, int, ChunkPlan, Any]]) -> None:
        """A group task that crashed or hung: each of its chunks goes back to the head of the queue
        (after any urgent one), to be prepared in a task of its own, no try counted; a file that
        crashes its worker then fails alone, as any job's chunk does."""
        for _, job_id, plan, _ in reversed(items):
            self._alone.add(job_id)
            self._queue.insert(self._urgent_chunks, (job_id, plan))
        log.warning("a prepare task of %d jobs ended without an answer; each is prepared alone", len(items))

    def _save(self) -> list[ReadyJob]:
        """Save the prepared chunks when due (see SAVE_JOBS); the jobs they complete are ready then."""
        held = (self._jobs[j] for j in self._complete if j in self._jobs)
        urgent = any(prep.job.priority is Priority.URGENT for prep in held)
        due = self._unsaved_since is not None and (
            urgent
            or len(self._complete) >= self._save_jobs
            or not self._in_flight
            or self._monotonic() - self._unsaved_since >= self._save_seconds
        )
        if not due:
            return []
        chunks = [c for c in self._unsaved if c.job_id in self._jobs]  # not those dropped meanwhile
        complete = [j for j in self._complete if j in self._jobs]
        self._unsaved, self._complete, self._unsaved_since = [], [], None
        return self._record(chunks, complete)

    def _chunk_done(self, job_id: int, n: int, summary: ChunkSummary, payload: Any, from_store: bool) -> bool:
        """Count one prepared chunk in; True when it was its job's last."""
        prep = self._jobs[job_id]
        # The tasks hold no database access: what their OCR read is cached from here, at the save.
        self._reads += [(prep.job.sha256, read) for read in summary.ocr_reads]
        prep.payloads[n] = payload
        prep.request_bytes += summary.record.request_bytes
        prep.waiting.discard(n)
        self._measured.append(summary.record.request_bytes)
        pages = summary.record.last_page - summary.record.first_page + 1
        self.pages_prepared += pages
        self.pages_from_store += pages if from_store else 0
        self._metrics.pages_prepared(pages, summary.ocr_pages)
        return not prep.waiting

    def _finish(self, job_id: int) -> ReadyJob | None:
        ready = self._record([], [job_id])
        return ready[0] if ready else None

    def _record(self, chunks: Sequence[ChunkRecord], complete: Sequence[int]) -> list[ReadyJob]:
        """Save ``chunks`` and move the ``complete`` jobs to prepared; those still held are ready."""
        preps = [self._jobs.pop(job_id) for job_id in complete]
        self._alone.difference_update(complete)
        reads, self._reads = self._reads, []
        try:
            if reads:  # before the jobs they serve are prepared: a writer takes their text from here
                self._state.put_page_texts(reads)
            held = {lease.job_id for lease in self._state.record_prepared(chunks, [p.lease for p in preps])}
            why = "its lease is gone"
        except RaybatchError as exc:
            held, why = set(), str(exc)
        ready = []
        for prep in preps:
            if prep.job.id not in held:
                log.warning("job %d: could not record it prepared (%s)", prep.job.id, why)
                continue
            ready.append(ReadyJob(prep.job.id, prep.job.mode, dict(prep.payloads), prep.request_bytes))
        return ready

    def _fail(self, job_id: int, exc: BaseException) -> None:
        """A chunk that cannot be prepared fails its job with the reason; other jobs go on."""
        prep = self._jobs.get(job_id)
        if prep is None:
            return
        cause = exc.cause if isinstance(exc, RayTaskError) and exc.cause is not None else exc
        name, message = error_class(cause), failure_reason(cause)
        if isinstance(cause, TransientError):  # a database or storage blip: prepared again later
            log.warning("job %d: %s while preparing; it goes back to pending", job_id, message)
            again = {"attempts": max(0, prep.lease.attempt - 1)}  # an outage costs the job no try
            back = JobStatus.PENDING
            self._state.transition(job_id, [JobStatus.PREPARING], back, lease=prep.lease, **again)
            self._drop(job_id)
            return
        if self._fail_held(job_id, prep.lease, name, message):
            log.warning("job %d (%s) failed while preparing: %s", job_id, prep.job.source_name, message)
        self._drop(job_id)

    def _fail_held(self, job_id: int, lease: Lease, name: str, reason: str) -> bool:
        """Fail a job while this scheduler's lease on it holds; False when it was canceled or taken
        over meanwhile (the cancel or the new holder decides: this run goes on with its other jobs)."""
        try:
            return self._state.fail_job(job_id, "prepare", name, reason, lease=lease)
        except LeaseLost:
            log.info("job %d: no longer held (canceled or taken over); not failed", job_id)
            return False

    def _expire(self) -> None:
        """Tasks running past PREPARE_TIMEOUT (a hung render or OCR) are canceled; their job goes
        back to pending for another try, or fails ``TimeLimitExceeded`` on its last one. A group
        task past it is canceled and each of its chunks prepared alone: the one that hangs is found."""
        if self._timeout is None:
            return
        now = self._monotonic()
        late = [ref for ref, task in self._in_flight.items() if now - task.launched > self._timeout]
        for ref in [ref for ref in late if self._in_flight[ref].group]:
            task = self._in_flight.pop(ref)
            self._cancel(ref)
            self._prepare_alone([item for item in task.items if item[1] in self._jobs])
        for job_id in {self._in_flight[ref].items[0][1] for ref in late if ref in self._in_flight}:
            self._stop_tasks(job_id)
            prep = self._jobs.get(job_id)
            if prep is None:
                continue
            limit = f"PREPARE_TIMEOUT ({self._timeout:g} s)"
            if prep.lease.attempt >= self._max_attempts:
                reason = f"preparing ran past {limit} on each of {prep.lease.attempt} tries"
                log.warning("job %d (%s) failed: %s", job_id, prep.job.source_name, reason)
                self._fail_held(job_id, prep.lease, TimeLimitExceeded.__name__, reason)
            else:
                log.warning("job %d: preparing ran past %s; canceled, it goes back to pending", job_id, limit)
                self._state.transition(job_id, [JobStatus.PREPARING], JobStatus.PENDING, lease=prep.lease)
            self._drop(job_id)

    def _stop_tasks(self, job_id: int) -> None:
        """Cancel the job's tasks in flight (and its source load) and stop waiting for them; a group
        task goes on for its other jobs."""
        self._forget_tasks(job_id)
        prep = self._jobs.get(job_id)
        if prep is not None and prep.source is not None:
            self._cancel(prep.source)

    def _forget_tasks(self, job_id: int) -> None:
        """Stop waiting for the job's chunks; a task left with none of its chunks is canceled."""
        for ref, task in list(self._in_flight.items()):
            task.items = [item for item in task.items if item[1] != job_id]
            if not task.items:
                del self._in_flight[ref]
                if not task.from_store:
                    self._cancel(ref)

    def _drop(self, job_id: int) -> None:
        """Stop preparing a job: its queued chunks go, its tasks under way are canceled and
        forgotten (a later claim of the job starts afresh)."""
        self._forget_tasks(job_id)
        prep = self._jobs.pop(job_id, None)
        self._alone.discard(job_id)
        queued = len(self._queue)
        self._queue = deque(item for item in self._queue if item[0] != job_id)
        if prep is not None and prep.job.priority is Priority.URGENT:
            self._urgent_chunks = max(0, self._urgent_chunks - (queued - len(self._queue)))

    def hand_back(self) -> list[int]:
        """Stop preparing every job held (a drain): its tasks are canceled and it goes back to
        pending at once, the try not counted; the jobs handed back."""
        handed = list(self._jobs)
        for job_id in handed:
            lease = self._jobs[job_id].lease
            self._stop_tasks(job_id)
            try:
                self._state.transition(
                    job_id,
                    [JobStatus.PREPARING],
                    JobStatus.PENDING,
                    lease=lease,
                    attempts=max(0, lease.attempt - 1),
                )
            except RaybatchError as exc:  # the database is away: the lease runs out and frees it
                log.warning("job %d: could not hand it back: %s", job_id, exc)
            self._drop(job_id)
        return handed

    def forget(self, job_ids: Sequence[int]) -> None:
        """Stop preparing these jobs (canceled elsewhere)."""
        for job_id in job_ids:
            self._drop(job_id)


def cancel_task(ref: Any) -> None:
    """Stop a Ray task however far it got (a task stuck in native code ignores a polite cancel);
    a stand-in ref is left alone."""
    if not isinstance(ref, ray.ObjectRef):
        return
    try:
        ray.cancel(ref, force=True)
    except (RayError, TypeError, ValueError) as exc:  # already ended, or not a task's ref
        log.debug("cancel: %s", exc)


def failure_reason(exc: BaseException) -> str:
    """A one-line reason: our own messages as they are, Ray's crash reports shortened."""
    if isinstance(exc, RaybatchError):
        return str(exc)
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{type(exc).__name__}: {first[:300]}"


def _small_local(job: JobRecord) -> bool:
    """A local file within GROUP_SOURCE_BYTES: the tasks that prepare it read it themselves."""
    return job.source_uri.startswith("file:") and job.size_bytes <= GROUP_SOURCE_BYTES
