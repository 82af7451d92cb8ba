"""BatchCoordinator: the one stateful async actor between prepared chunks and filed answers.

One loop alternates two phases: *submit* packs the prepared requests of up to BATCH_SIZE
jobs into batches and creates them; *poll* looks at every batch the DB says is in flight, writes
progress to its jobs and, once a batch has ended, files its results by custom_id. Urgent jobs skip
batching and go through synchronous calls. The pause flag skips both phases. Everything that blocks
(SDK, database) runs on the actor's own thread pool, never on the event loop. The DB is the truth:
a restarted coordinator reattaches every batch in flight; prepared payloads are the only cache, and
the driver re-offers them.

Recovery is a sweep, run at start and every SWEEP_INTERVAL: intents never attached are adopted or
dropped, chunks held by no live batch or call go again, and jobs whose status lags their chunks
are settled. So every window a crash or a database error can open closes by itself.

Several coordinators may share one database (two local runs each start their own Ray). Each beats
in the database; only the lead (a lease one of them holds) sweeps and polls, and a coordinator's
synchronous calls carry its own tag, so none releases another's calls in flight. A coordinator no
driver called for COORDINATOR_IDLE_SECONDS, holding no offer and no call, says it is idle.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from raybatch.actors.batch_create import BatchCreator
from raybatch.actors.batch_poll import BatchPolls
from raybatch.actors.filing import ResultFiler
from raybatch.actors.sync_calls import SYNC_BATCH, SyncCalls
from raybatch.claude.batch_client import AnthropicBatchClient
from raybatch.claude.poller import poll_backoff
from raybatch.claude.records import PreparedRequest
from raybatch.claude.sync_client import AnthropicMessageClient
from raybatch.errors import (
    AuthenticationFailed,
    InvalidRequest,
    OutagePastBudget,
    PermanentError,
    SpendLimitReached,
    TransientError,
    error_class,
)
from raybatch.metrics import Metrics
from raybatch.models import BatchStatus, ChunkStatus, JobStatus, Priority, sync_tag
from raybatch.settings import ClaudeSettings, model_prices
from raybatch.spend import SpendGate
from raybatch.state.port import BatchRecord, StateStore
from raybatch.steps.pack import ENVELOPE_BYTES, megabytes, pack
from raybatch.units import MB

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = ["SYNC_BATCH", "BatchCoordinator", "CoordinatorSnapshot", "Offer"]

RESOLVE_SECONDS = 120.0  # a prepared payload not readable by then is treated as lost


@dataclass(frozen=True)
class Offer:
    """A job's prepared chunks: chunk number → a handle that resolves to a PreparedRequest."""

    job_id: int
    chunks: Mapping[int, Any]
    mode: str
    request_bytes: int


@dataclass(frozen=True)
class CoordinatorSnapshot:
    """What the driver asks each tick: the backlog it must not outrun, and what is in flight."""

    offered_jobs: int
    pending_bytes: int
    active_batches: int
    sync_in_flight: int
    paused: bool
    parked: bool
    running: bool
    stopped: str | None = None  # why no work can be sent at all (credentials rejected)


class BatchCoordinator:
    """The unified submit/poll loop. Plain class: Ray wraps it as a named async actor."""

    def __init__(
        self,
        claude: ClaudeSettings,
        state: StateStore,
        *,
        batches: AnthropicBatchClient | None = None,
        messages: AnthropicMessageClient | None = None,
        resolve: Callable[[Any], Awaitable[Any]] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        metrics: Metrics | None = None,
        autostart: bool = True,
        coordinator_id: str | None = None,
        on_idle: Callable[[], None] | None = None,
    ) -> None:
        self.id = coordinator_id or uuid.uuid4().hex[:16]
        self._on_idle = on_idle  # called once no driver called for a while and nothing is held
        self._claude = claude
        self._autostart = autostart  # False: the caller drives ``step`` itself (tests)
        self._state = state
        self._batches = batches or AnthropicBatchClient(claude)
        self._messages = messages or AnthropicMessageClient(claude)
        self._resolve = resolve or _identity
        self._monotonic = monotonic
        self._metrics = metrics or Metrics()
        self._pool = ThreadPoolExecutor(max_workers=4 + claude.sync_concurrency, thread_name_prefix="coord")
        self._filer = ResultFiler(
            state, max_attempts=claude.max_attempts, metrics=self._metrics, prices=model_prices(claude)
        )
        self._spend = SpendGate(state, model_prices(claude))
        self._offers: dict[int, Offer] = {}
        self._first_offer_at: float | None = None
        self._flush = False
        self._parked_until = 0.0
        self._stopped: str | None = None
        self._sync = SyncCalls(
            state,
            self._messages,
            self._filer,
            io=self._io,
            settle=self._settle,
            on_permanent=self._fail_jobs,
            on_parked=self._park,
            tag=sync_tag(self.id),
        )
        self._polls = BatchPolls(
            state,
            self._batches,
            self._filer,
            io=self._io,
            settle=self._settle,
            metrics=self._metrics,
            deadline=claude.poll_deadline,
        )
        self._creator = BatchCreator(
            state, self._batches, io=self._io, outage_budget=claude.outage_budget, metrics=self._metrics
        )
        self._loop_task: asyncio.Task[None] | None = None
        self._submitting = asyncio.Lock()  # one submit phase at a time: nothing is sent twice
        self._sync_passes: set[asyncio.Task[None]] = set()
        self._recovered = False
        self._lead = False
        self._next_beat = 0.0
        self._last_call = monotonic()
        self._next_sweep = 0.0
        self._delays = poll_backoff(claude.poll_interval).delays()

    # --- what the driver calls ------------------------------------------------------------
    async def offer(self, job_id: int, chunks: Mapping[int, Any], mode: str, request_bytes: int) -> None:
        """Hand over a job's prepared chunks (idempotent: a second offer replaces the first)."""
        self._called()
        self._offers[job_id] = Offer(job_id, dict(chunks), mode, request_bytes)
        if self._first_offer_at is None:
            self._first_offer_at = self._monotonic()
        self._ensure_running()
        if mode == "sync":
            self._send_sync_now()

    async def forget(self, job_ids: Sequence[int]) -> None:
        """Drop payloads of jobs that no longer need them (answered, failed, canceled)."""
        self._called()
        for job_id in job_ids:
            self._offers.pop(job_id, None)

    async def flush(self, flush: bool = True) -> None:
        """No more work is coming soon: submit what is prepared without waiting to fill a batch."""
        self._called()
        self._flush = flush
        self._ensure_running()

    async def snapshot(self) -> CoordinatorSnapshot:
        """The backlog and what is in flight; also restarts the loop after an actor restart."""
        self._called()
        self._ensure_running()
        active = await self._io(self._state.active_batches)
        paused = await self._io(self._state.is_paused)
        # The backlog is what still waits for a batch: offers stay here until answered (a retry
        # needs their payloads), but once submitted they must not hold preparation back.
        waiting = {j.id for j in await self._io(self._state.list_jobs, [JobStatus.PREPARED])}
        return CoordinatorSnapshot(
            offered_jobs=len(self._offers),
            pending_bytes=sum(o.request_bytes for o in self._offers.values() if o.job_id in waiting),
            active_batches=len(active),
            sync_in_flight=len(self._sync.tasks),
            paused=paused,
            parked=self._monotonic() < self._parked_until,
            running=self._loop_task is not None and not self._loop_task.done(),
            stopped=self._stopped,
        )

    async def stop(self) -> None:
        """End the loop and wait for synchronous calls under way."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            await asyncio.gather(self._loop_task, return_exceptions=True)
        await asyncio.gather(*self._sync_passes, return_exceptions=True)
        await asyncio.gather(*self._sync.tasks, return_exceptions=True)
        await self._guarded("retiring", self._io(self._state.retire, self.id))
        self._pool.shutdown(wait=False)

    def _called(self) -> None:
        self._last_call = self._monotonic()

    @property
    def idle(self) -> bool:
        """No driver called for COORDINATOR_IDLE_SECONDS and nothing is held: no offer, no call."""
        quiet = self._monotonic() - self._last_call >= self._claude.coordinator_idle_seconds
        return quiet and not self._offers and not self._sync.tasks and not self._sync.live

    @property
    def _sync_tasks(self) -> set[asyncio.Task[None]]:
        return self._sync.tasks

    # --- the loop -------------------------------------------------------------------------
    def _ensure_running(self) -> None:
        if not self._autostart:
            return
        if self._loop_task is None or self._loop_task.done():
            self._loop_task = asyncio.get_running_loop().create_task(self._run(), name="coordinator-loop")

    async def _run(self) -> None:
        while True:
            try:
                busy = await self.step()
            except asyncio.CancelledError:
                raise
            except Exception:  # one bad pass must not end the loop; the DB keeps the truth
                log.exception("coordinator pass failed; will try again")
                busy = False
            if self.idle and self._on_idle is not None:
                log.info("no driver called for a while and nothing is held: the coordinator exits")
                await self._guarded("retiring", self._io(self._state.retire, self.id))
                self._on_idle()
                return
            await asyncio.sleep(0.2 if busy else next(self._delays))

    async def step(self) -> bool:
        """One pass: the lead sweeps when due; then submit, and the lead polls, unless paused. True
        when work moved."""
        await self._beat()
        if self._lead and not self._recovered:
            await self._sweep()
            self._recovered = True
        if await self._io(self._state.is_paused):
            return False
        if self._lead and self._monotonic() >= self._next_sweep:
            await self._sweep()
        await self._sync.file_pending()
        submitted = await self._submit_phase()
        polled = await self._polls.poll() if self._lead else False
        if submitted or polled:
            self._delays = poll_backoff(self._claude.poll_interval).delays()
        return submitted

    # --- recovery -------------------------------------------------------------------------
    async def _beat(self) -> None:
        """Say this coordinator is alive and learn whether it leads (a few times a lease)."""
        if self._monotonic() < self._next_beat:
            return
        lease = self._claude.coordinator_lease_seconds
        try:
            lead = await self._io(self._state.beat, self.id, lease)
        except Exception as exc:  # the database away: keep the last answer, try again soon
            log.warning("coordinator heartbeat failed, will try again: %s", exc)
            self._next_beat = self._monotonic() + 1.0
            return
        self._next_beat = self._monotonic() + lease / 3
        if lead and not self._lead:
            log.info("coordinator %s leads: it sweeps and polls", self.id)
            self._recovered = False  # a new lead recovers what the last one left
        self._lead = lead

    async def _sweep(self) -> None:
        """Close every window a crash or an error left open; the DB says what is in flight.

        Each part stands alone: one that fails (the API or the database away) is logged and
        tried again at the next sweep, and never holds up the others or the pass.
        """
        self._next_sweep = self._monotonic() + self._claude.sweep_interval
        await self._guarded("recording created batches", self._creator.record_created())
        for record in await self._io(self._state.active_batches):
            if record.status is BatchStatus.CREATING:
                await self._guarded(f"reconciling intent {record.id}", self._reconcile(record))
        await self._guarded("releasing requests nothing holds", self._release_unheld())
        await self._guarded("settling jobs", self._settle_lagging())

    async def _guarded(self, what: str, work: Awaitable[None]) -> None:
        try:
            await work
        except Exception as exc:
            log.warning("recovery: %s failed, will try again: %s", what, exc)

    async def _reconcile(self, record: BatchRecord) -> None:
        if await self._creator.reconcile(record):
            await self._settle(set(await self._io(self._state.batch_jobs, record.id)))

    async def _release_unheld(self) -> None:
        """Sync calls no task runs any more (this coordinator's, or any of one that stopped beating)
        go back to prepared; chunks of batches no longer in flight go again."""
        tag = self._sync.tag
        cut_short = sorted(set(await self._io(self._state.submitted_chunk_ids, tag)) - self._sync.live)
        if cut_short:
            await self._io(self._state.release_chunks, tag, cut_short)
            log.info("recovery: %d synchronous requests cut short go again", len(cut_short))
        orphaned = await self._io(self._state.release_orphaned_sync_chunks)
        if orphaned:
            log.info("recovery: %d synchronous requests of stopped coordinators go again", orphaned)
        stranded = await self._io(self._state.release_stranded_chunks, [SYNC_BATCH])
        if stranded:
            log.info("recovery: %d requests of batches no longer in flight go again", stranded)

    async def _settle_lagging(self) -> None:
        unsettled = await self._io(self._state.unsettled_jobs)
        if unsettled:
            log.info("recovery: settling jobs %s", unsettled[:20])
            await self._settle(set(unsettled))

    # --- submit phase ---------------------------------------------------------------------
    def _send_sync_now(self) -> None:
        """Send synchronous work as soon as it is offered, not at the loop's next pass (which may
        be busy polling and filing a backlog's batches)."""
        if not self._autostart or not self._recovered:
            return
        task = asyncio.get_running_loop().create_task(self._sync_pass(), name="sync-pass")
        self._sync_passes.add(task)
        task.add_done_callback(self._sync_passes.discard)

    async def _sync_pass(self) -> None:
        try:
            if not await self._io(self._state.is_paused):
                await self._submit_phase(sync_only=True)
        except Exception:  # the loop's next pass sends it
            log.exception("sending synchronous work failed; the next pass tries again")

    async def _submit_phase(self, *, sync_only: bool = False) -> bool:
        # Jobs are settled after the lock is let go: a synchronous pass waits only for the sending.
        async with self._submitting:
            sent = await self._submit(sync_only)
        if sent:
            await self._settle(sent)
        return sent is not None

    async def _submit(self, sync_only: bool) -> set[int] | None:
        """Send what is due; the jobs to settle now (None: nothing was done)."""
        if self._monotonic() < self._parked_until:
            return None
        offers, sync_ids = await self._ready_offers()
        if offers and self._stopped is not None:
            await self._fail_jobs({o.job_id for o in offers}, AuthenticationFailed(self._stopped))
            return set()
        if offers and (sync_only or not self._due(offers)):  # synchronous work never waits for a batch
            offers = [o for o in offers if o.job_id in sync_ids]
        if not offers:
            return None
        requests = await self._requests_for(offers)
        requests, held = await self._io(self._spend.admit, requests, sync_ids)
        if held and not requests:
            return None  # parked by the spend cap until it is raised
        sync = [r for r in requests if r.job_id in sync_ids]
        batch = [r for r in requests if r.job_id not in sync_ids]
        if sync:
            await self._sync.start(sync)
            self._metrics.sync_sent(len(sync))
        if batch:
            await self._submit_batches(batch)
        if batch or not self._offers:  # a synchronous send does not restart a batch's wait
            self._first_offer_at = self._monotonic() if self._offers else None
        return {o.job_id for o in offers}

    async def _ready_offers(self) -> tuple[list[Offer], set[int]]:
        """Offered jobs the DB holds as prepared, urgent first, then oldest first, at most
        BATCH_SIZE of them; and those to send synchronously (the DB's mode: a job made urgent
        after it was offered goes synchronously)."""
        if not self._offers:
            return [], set()
        jobs = await self._io(self._state.list_jobs, [JobStatus.PREPARED])
        first = sorted(jobs, key=lambda j: (j.priority is not Priority.URGENT, j.id))
        jobs = [j for j in first if j.id in self._offers][: self._claude.batch_size]
        return [self._offers[j.id] for j in jobs], {j.id for j in jobs if j.mode == "sync"}

    def _due(self, offers: Sequence[Offer]) -> bool:
        """Submit when a batch is full, BATCH_SIZE jobs wait, the driver flushes, or the wait is long."""
        if self._flush or len(offers) >= self._claude.batch_size:
            return True
        if sum(o.request_bytes for o in offers) >= megabytes(self._claude.batch_max_mb):
            return True
        waited = self._monotonic() - (self._first_offer_at or self._monotonic())
        return waited >= self._claude.poll_interval

    async def _requests_for(self, offers: Sequence[Offer]) -> list[PreparedRequest]:
        """The requests still owed an answer (prepared or to retry), resolved from their handles.

        A job whose payloads are gone (its driver died, or a chunk was never offered) is sent back
        to be prepared again instead of blocking the pass.
        """
        requests: list[PreparedRequest] = []
        creating = await self._io(self._state.intent_chunk_ids)  # may be in a batch already
        for offer in offers:
            chunks = await self._io(self._state.get_chunks, offer.job_id)
            owed = [
                c.n
                for c in chunks
                if c.status in (ChunkStatus.PREPARED, ChunkStatus.RETRY) and c.custom_id not in creating
            ]
            try:
                resolved = [
                    await asyncio.wait_for(self._resolve(offer.chunks[n]), RESOLVE_SECONDS) for n in owed
                ]
            except Exception as exc:  # KeyError, or Ray's OwnerDiedError / ObjectLostError
                log.warning("job %d: prepared payloads unavailable (%s); prepared again", offer.job_id, exc)
                self._offers.pop(offer.job_id, None)
                await self._io(self._state.transition, offer.job_id, [JobStatus.PREPARED], JobStatus.PENDING)
                continue
            requests.extend(p.request if hasattr(p, "request") else p for p in resolved)
        return requests

    async def _submit_batches(self, requests: Sequence[PreparedRequest]) -> None:
        max_bytes = megabytes(self._claude.batch_max_mb)
        too_large = [r for r in requests if ENVELOPE_BYTES + r.encoded_size > max_bytes]
        for request in too_large:
            reason = (
                f"chunk {request.n} is {request.encoded_size / MB:.1f} MB as a request: "
                f"larger than a batch may be (BATCH_MAX_MB={self._claude.batch_max_mb})"
            )
            await self._fail_jobs({request.job_id}, InvalidRequest(reason))
        refused = {r.job_id for r in too_large}
        fitting = [r for r in requests if r.job_id not in refused]
        groups = pack(fitting, max_bytes=max_bytes, max_requests=self._claude.batch_max_requests)
        for group in groups:
            try:
                await self._creator.create(group)
            except SpendLimitReached:
                self._park("spend limit reached")
                return
            except OutagePastBudget as exc:
                self._park(f"the API is unavailable: {exc}")
                return
            except PermanentError as exc:
                await self._fail_jobs({r.job_id for r in group}, exc)
            except TransientError as exc:
                log.warning("batch create interrupted, the sweep reconciles it: %s", exc)

    def _park(self, reason: str) -> None:
        seconds = self._claude.park_seconds
        log.warning("%s: new work parked for %.0f s", reason, seconds)
        self._parked_until = self._monotonic() + seconds

    # --- jobs after their chunks moved ----------------------------------------------------
    async def _settle(self, job_ids: set[int]) -> None:
        """Move each job on by its chunks: answered, failed, back to prepared for a retry, or wait."""
        for job_id in sorted(job_ids):
            outcome = await self._io(self._filer.settle, job_id)
            if outcome in (JobStatus.ANSWERED, JobStatus.FAILED):
                self._offers.pop(job_id, None)

    async def _fail_jobs(self, job_ids: set[int], exc: BaseException) -> None:
        if isinstance(exc, AuthenticationFailed) and self._stopped is None:
            self._stopped = f"Claude rejected the credentials; set ANTHROPIC_API_KEY and run again ({exc})"
            log.error("%s", self._stopped)
            exc = AuthenticationFailed(self._stopped)
        for job_id in sorted(job_ids):
            await self._io(self._state.fail_job, job_id, "claude", error_class(exc), str(exc))
            self._offers.pop(job_id, None)

    async def _io(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking call on the actor's own pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))


async def _identity(value: Any) -> Any:
    return value
