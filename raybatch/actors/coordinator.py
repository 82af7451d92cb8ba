"""BatchCoordinator: the one stateful async actor between prepared chunks and filed answers.

One loop alternates two phases (seed 000): *submit* packs the prepared requests of up to BATCH_SIZE
jobs into batches and creates them; *poll* looks at every batch the DB says is in flight, writes
progress to its jobs and, once a batch has ended, files its results by custom_id. Urgent jobs skip
batching and go through synchronous calls. The pause flag skips both phases. Everything that blocks
(SDK, database) runs on the actor's own thread pool, never on the event loop. The DB is the truth:
a restarted coordinator reattaches every batch in flight; prepared payloads are the only cache, and
the driver re-offers them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from raybatch.actors.filing import ResultFiler
from raybatch.claude.batch_client import AnthropicBatchClient
from raybatch.claude.poller import poll_backoff, poll_once
from raybatch.claude.records import BatchState, PreparedRequest
from raybatch.claude.sync_client import AnthropicMessageClient
from raybatch.errors import BatchFailed, PermanentError, SpendLimitReached, TransientError, error_class
from raybatch.metrics import Metrics
from raybatch.models import SYNC_BATCH_ID, BatchStatus, ChunkStatus, JobStatus
from raybatch.settings import ClaudeSettings, model_prices
from raybatch.spend import SpendGate
from raybatch.state.port import BatchRecord, StateStore
from raybatch.steps.pack import pack

log = logging.getLogger(__name__)
T = TypeVar("T")

SYNC_BATCH = SYNC_BATCH_ID
PARK_SECONDS = 600.0  # how long work waits after the account's spend limit was reached
RESULT_READS = 5  # tries to read one batch's results when the stream is cut
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
    ) -> None:
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
        self._sync_tasks: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self._recovered = False
        self._delays = poll_backoff(claude.poll_interval).delays()

    # --- what the driver calls ------------------------------------------------------------
    async def offer(self, job_id: int, chunks: Mapping[int, Any], mode: str, request_bytes: int) -> None:
        """Hand over a job's prepared chunks (idempotent: a second offer replaces the first)."""
        self._offers[job_id] = Offer(job_id, dict(chunks), mode, request_bytes)
        if self._first_offer_at is None:
            self._first_offer_at = self._monotonic()
        self._ensure_running()

    async def forget(self, job_ids: Sequence[int]) -> None:
        """Drop payloads of jobs that no longer need them (answered, failed, canceled)."""
        for job_id in job_ids:
            self._offers.pop(job_id, None)

    async def flush(self, flush: bool = True) -> None:
        """No more work is coming soon: submit what is prepared without waiting to fill a batch."""
        self._flush = flush
        self._ensure_running()

    async def snapshot(self) -> CoordinatorSnapshot:
        """The backlog and what is in flight; also restarts the loop after an actor restart."""
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
            sync_in_flight=len(self._sync_tasks),
            paused=paused,
            parked=self._monotonic() < self._parked_until,
            running=self._loop_task is not None and not self._loop_task.done(),
        )

    async def stop(self) -> None:
        """End the loop and wait for synchronous calls under way."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            await asyncio.gather(self._loop_task, return_exceptions=True)
        await asyncio.gather(*self._sync_tasks, return_exceptions=True)
        self._pool.shutdown(wait=False)

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
            await asyncio.sleep(0.2 if busy else next(self._delays))

    async def step(self) -> bool:
        """One pass: recover once, then submit and poll unless paused. True when work moved."""
        if not self._recovered:
            await self._recover()
        if await self._io(self._state.is_paused):
            return False
        submitted = await self._submit_phase()
        polled = await self._poll_phase()
        if submitted or polled:
            self._delays = poll_backoff(self._claude.poll_interval).delays()
        return submitted

    # --- recovery -------------------------------------------------------------------------
    async def _recover(self) -> None:
        """Reattach what the DB says is in flight: intents without a batch, sync calls cut short."""
        for record in await self._io(self._state.active_batches):
            if record.status is BatchStatus.CREATING:
                await self._reconcile_intent(record)
        released = await self._io(self._state.release_chunks, SYNC_BATCH)
        if released:
            log.info("recovery: %d synchronous requests cut short go again", released)
        self._recovered = True

    async def _reconcile_intent(self, record: BatchRecord) -> None:
        """An intent recorded but never attached: adopt the batch if the API has it, else drop it."""
        known = await self._io(self._known_batch_ids)
        found = await self._io(self._batches.find_created, record.request_count, record.created_at, known)
        if found is None:
            await self._io(self._state.mark_batch_lost, record.id)
            log.info("recovery: batch intent %d was never created", record.id)
            return
        await self._attach(record.id, found)
        log.info("recovery: batch intent %d adopted as %s", record.id, found.id)

    def _known_batch_ids(self) -> set[str]:
        return self._state.known_batch_ids()

    # --- submit phase ---------------------------------------------------------------------
    async def _submit_phase(self) -> bool:
        if self._monotonic() < self._parked_until:
            return False
        offers = await self._ready_offers()
        if not offers or not self._due(offers):
            return False
        requests = await self._requests_for(offers)
        sync_ids = {o.job_id for o in offers if o.mode == "sync"}
        requests, held = await self._io(self._spend.admit, requests, sync_ids)
        if held and not requests:
            return False  # parked by the spend cap until it is raised
        sync = [r for r in requests if r.job_id in sync_ids]
        batch = [r for r in requests if r.job_id not in sync_ids]
        if sync:
            await self._start_sync(sync)
            self._metrics.sync_sent(len(sync))
        if batch:
            await self._submit_batches(batch)
        await self._settle({o.job_id for o in offers})
        self._first_offer_at = self._monotonic() if self._offers else None
        return True

    async def _ready_offers(self) -> list[Offer]:
        """Offered jobs the DB holds as prepared, oldest first, at most BATCH_SIZE of them."""
        if not self._offers:
            return []
        jobs = await self._io(self._state.list_jobs, [JobStatus.PREPARED])
        ready = [self._offers[j.id] for j in sorted(jobs, key=lambda j: j.id) if j.id in self._offers]
        return ready[: self._claude.batch_size]

    def _due(self, offers: Sequence[Offer]) -> bool:
        """Submit when a batch is full, BATCH_SIZE jobs wait, the driver flushes, or the wait is long."""
        if self._flush or len(offers) >= self._claude.batch_size:
            return True
        if sum(o.request_bytes for o in offers) >= self._claude.batch_max_mb * 1_000_000:
            return True
        waited = self._monotonic() - (self._first_offer_at or self._monotonic())
        return waited >= self._claude.poll_interval

    async def _requests_for(self, offers: Sequence[Offer]) -> list[PreparedRequest]:
        """The requests still owed an answer (prepared or to retry), resolved from their handles.

        A job whose payloads are gone (its driver died, or a chunk was never offered) is sent back
        to be prepared again instead of blocking the pass.
        """
        requests: list[PreparedRequest] = []
        for offer in offers:
            chunks = await self._io(self._state.get_chunks, offer.job_id)
            owed = [c.n for c in chunks if c.status in (ChunkStatus.PREPARED, ChunkStatus.RETRY)]
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
        max_bytes = self._claude.batch_max_mb * 1_000_000
        groups = pack(requests, max_bytes=max_bytes, max_requests=self._claude.batch_max_requests)
        for group in groups:
            try:
                await self._create_batch(group)
            except SpendLimitReached:
                self._park()
                return
            except PermanentError as exc:
                await self._fail_jobs({r.job_id for r in group}, exc)
            except TransientError as exc:
                log.warning("batch create failed, the jobs wait for the next pass: %s", exc)

    async def _create_batch(self, group: Sequence[PreparedRequest]) -> None:
        custom_ids = [r.custom_id for r in group]
        size = sum(r.encoded_size for r in group)
        intent_id = await self._io(self._state.record_batch_intent, custom_ids, size)
        intent = await self._io(self._state.get_batch, intent_id)
        known = await self._io(self._known_batch_ids)
        try:
            batch = await self._io(
                self._batches.create_reconciled, group, created_after=intent.created_at, known_ids=known
            )
        except BaseException:
            await self._io(self._state.mark_batch_lost, intent_id)
            raise
        await self._attach(intent_id, batch)
        self._metrics.batch_created(len(group), size)
        log.info("batch %s created: %d requests, %.1f MB", batch.id, len(group), size / 1e6)

    async def _attach(self, intent_id: int, batch: BatchState) -> None:
        """Record the created batch; its chunks become submitted in the same transaction."""
        raw = json.dumps(dict(batch.raw), default=str)
        await self._io(self._state.attach_batch, intent_id, batch.id, BatchStatus.IN_PROGRESS, raw)

    # --- synchronous (urgent) jobs --------------------------------------------------------
    async def _start_sync(self, requests: Sequence[PreparedRequest]) -> None:
        await self._io(self._state.mark_chunks_submitted, [r.custom_id for r in requests], SYNC_BATCH)
        task = asyncio.get_running_loop().create_task(self._run_sync(list(requests)))
        self._sync_tasks.add(task)
        task.add_done_callback(self._sync_tasks.discard)

    async def _run_sync(self, requests: list[PreparedRequest]) -> None:
        try:
            outcome = await self._io(self._messages.send, requests)
        except PermanentError as exc:
            await self._io(self._state.release_chunks, SYNC_BATCH, [r.custom_id for r in requests])
            await self._fail_jobs({r.job_id for r in requests}, exc)
            return
        if outcome.parked:  # never sent: back to prepared, no try counted
            await self._io(self._state.release_chunks, SYNC_BATCH, outcome.parked)
            self._park()
        sent = [r.custom_id for r in requests if r.custom_id not in set(outcome.parked)]
        await self._io(self._filer.file, SYNC_BATCH, sent, outcome.results)
        await self._settle({r.job_id for r in requests})

    def _park(self) -> None:
        log.warning("spend limit reached: new work parked for %.0f s", PARK_SECONDS)
        self._parked_until = self._monotonic() + PARK_SECONDS

    # --- poll phase -----------------------------------------------------------------------
    async def _poll_phase(self) -> bool:
        moved = False
        active = await self._io(self._state.active_batches)
        self._metrics.batches_in_flight(len(active))
        for record in active:
            if record.anthropic_id is None or record.status is BatchStatus.CREATING:
                continue
            moved = await self._poll_batch(record) or moved
        return moved

    async def _poll_batch(self, record: BatchRecord) -> bool:
        assert record.anthropic_id is not None
        age = (datetime.now(UTC) - _aware(record.created_at)).total_seconds()
        try:
            state = await self._io(poll_once, self._batches, record.anthropic_id, age=age)
        except BatchFailed as exc:
            await self._lose_batch(record, exc)
            return True
        except TransientError as exc:
            log.warning("poll of %s failed, will poll again: %s", record.anthropic_id, exc)
            return False
        if state is None:
            return False
        jobs = await self._io(self._state.batch_jobs, record.id)
        await self._io(self._state.set_progress, {job: round(100 * state.done_fraction, 1) for job in jobs})
        if state.status is not BatchStatus.ENDED:
            await self._io(self._state.update_batch, state.id, state.status, dict(state.counts), _raw(state))
            return False
        await self._collect(record, state)
        return True

    async def _collect(self, record: BatchRecord, state: BatchState) -> None:
        """Read an ended batch's results, file each by custom_id, then settle its jobs."""
        assert record.anthropic_id is not None
        expected = await self._io(self._state.batch_chunks, record.id)
        results = await self._io(self._read_results, record.anthropic_id)
        await self._io(self._filer.file, record.anthropic_id, expected, results)
        await self._io(self._state.update_batch, state.id, BatchStatus.ENDED, dict(state.counts), _raw(state))
        self._metrics.batch_ended()
        await self._settle(set(await self._io(self._state.batch_jobs, record.id)))

    def _read_results(self, batch_id: str) -> list[Any]:
        """Every result of a batch; a stream cut mid-way is read again, keeping what arrived."""
        seen: dict[str, Any] = {}
        for attempt in range(1, RESULT_READS + 1):
            try:
                with self._batches.results(batch_id) as stream:
                    for result in stream:
                        seen.setdefault(result.custom_id, result)
                return list(seen.values())
            except TransientError as exc:
                if attempt == RESULT_READS:
                    raise
                log.warning("results of %s cut after %d; reading again: %s", batch_id, len(seen), exc)
                time.sleep(min(2.0**attempt, 30.0))
        return list(seen.values())

    async def _lose_batch(self, record: BatchRecord, exc: Exception) -> None:
        """A batch the API no longer knows: its chunks go again in a later batch."""
        log.warning("batch %s lost: %s", record.anthropic_id, exc)
        expected = await self._io(self._state.batch_chunks, record.id)
        await self._io(self._filer.lose, record.anthropic_id or "", expected, error_class(exc), str(exc))
        await self._io(self._state.mark_batch_lost, record.id)
        await self._settle(set(await self._io(self._state.batch_jobs, record.id)))

    # --- jobs after their chunks moved ----------------------------------------------------
    async def _settle(self, job_ids: set[int]) -> None:
        """Move each job on by its chunks: answered, failed, back to prepared for a retry, or wait."""
        for job_id in sorted(job_ids):
            outcome = await self._io(self._filer.settle, job_id)
            if outcome in (JobStatus.ANSWERED, JobStatus.FAILED):
                self._offers.pop(job_id, None)

    async def _fail_jobs(self, job_ids: set[int], exc: BaseException) -> None:
        for job_id in sorted(job_ids):
            await self._io(self._state.fail_job, job_id, "claude", error_class(exc), str(exc))
            self._offers.pop(job_id, None)

    async def _io(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking call on the actor's own pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))


async def _identity(value: Any) -> Any:
    return value


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _raw(state: BatchState) -> str:
    return json.dumps(dict(state.raw), default=str)
