"""BatchCoordinator: the one stateful async actor between prepared chunks and filed answers.

One loop alternates two phases: *submit* packs the prepared requests of the jobs that wait (once
BATCH_SIZE of them do, or the driver flushes) into batches and creates them; *poll* looks at the
batches the DB says are in flight, writes progress to its jobs and, once a batch has ended, files
its results by custom_id. Urgent jobs skip batching and go through synchronous calls. The pause
flag skips both phases. Everything that blocks (SDK, database) runs on the actor's own thread pool,
never on the event loop. The DB is the truth: a restarted coordinator reattaches every batch in
flight; prepared payloads are the only cache, and the driver re-offers them.

Recovery is a sweep, run at start and every SWEEP_INTERVAL, that closes every window a crash or a
database error can open. Several coordinators may share one database (two local runs each start
their own Ray; a run with other settings or code gets a coordinator of its own): each polls the
batches it created, only the lead (a lease the newest live one holds) sweeps and polls those of
coordinators that stopped, and a coordinator's synchronous calls carry its own tag, so none releases
another's calls in flight. An outdated coordinator (a newer one beats) so finishes what it holds and
takes nothing new; no driver called for COORDINATOR_IDLE_SECONDS, holding no offer, no call and no
batch of its own in flight, it says it is idle.

This class composes the parts, each in its own module: the offered jobs (``offers``), the submit
phase (``submit``, creating batches through ``batch_create``), the synchronous calls
(``sync_calls``, keeping the answers the database refuses in ``spool``), the poll phase
(``batch_poll``, filing through ``filer``) and the lease and sweep (``recovery``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from raybatch.claude.batch_client import AnthropicBatchClient
from raybatch.claude.poller import poll_backoff
from raybatch.claude.sync_client import AnthropicMessageClient
from raybatch.coordinator.batch_create import BatchCreator, Io
from raybatch.coordinator.batch_poll import BatchPolls
from raybatch.coordinator.filer import ResultFiler
from raybatch.coordinator.offers import Offer, Offers
from raybatch.coordinator.recovery import Recovery, guarded
from raybatch.coordinator.snapshot import CoordinatorSnapshot
from raybatch.coordinator.spool import AnswerSpool
from raybatch.coordinator.submit import Submitter
from raybatch.coordinator.sync_calls import SYNC_BATCH, SyncCalls
from raybatch.errors import TransientError
from raybatch.metrics import Metrics
from raybatch.models import ProcessingMode, sync_tag
from raybatch.outage import Outage
from raybatch.settings import ClaudeSettings, model_prices
from raybatch.spend import SpendGate
from raybatch.state.port import StateStore
from raybatch.steps.pack import megabytes

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = ["SYNC_BATCH", "BatchCoordinator", "Offer"]

CALLS_WAITING = 64  # synchronous sends waiting at once (each urgent offer is one); more queue


class Settled:
    """A count of the passes that settled answered jobs (batch results, synchronous answers, the
    spool), and a wait for the next one: a driver that waits for it takes the answers to its
    writers as they are filed, not at its next look at the database."""

    def __init__(self) -> None:
        self.count = 0
        self._next = asyncio.Event()

    def bump(self) -> None:
        self.count += 1
        self._next.set()
        self._next = asyncio.Event()

    async def after(self, seen: int, seconds: float) -> None:
        """Return once the count passed ``seen``, or after ``seconds``."""
        if self.count > seen or seconds <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._next.wait(), seconds)


class BatchCoordinator:
    """The unified submit/poll loop. Plain class: Ray wraps it as a named async actor."""

    def __init__(
        self,
        claude: ClaudeSettings,
        state: StateStore,
        *,
        batches: AnthropicBatchClient | None = None,
        messages: AnthropicMessageClient | None = None,
        resolve: Callable[[list[Any]], Awaitable[list[Any]]] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        metrics: Metrics | None = None,
        autostart: bool = True,
        coordinator_id: str | None = None,
        on_idle: Callable[[], None] | None = None,
        spool: AnswerSpool | None = None,
    ) -> None:
        self.id = coordinator_id or uuid.uuid4().hex[:16]
        self._on_idle = on_idle  # called once no driver called for a while and nothing is held
        self._claude = claude
        self._autostart = autostart  # False: the caller drives ``step`` itself (tests)
        self._state = state
        self._monotonic = monotonic
        self._outage = Outage(monotonic)  # passes failing for a transient reason
        batches = batches or AnthropicBatchClient(claude)
        metrics = metrics or Metrics()
        self._pool = ThreadPoolExecutor(max_workers=4 + claude.sync_concurrency, thread_name_prefix="coord")
        # Synchronous calls wait on their own threads (the client bounds the calls themselves), and
        # the beat has a thread of its own: neither a burst of calls nor a long pass starves the lease.
        self._calls_pool = ThreadPoolExecutor(max_workers=CALLS_WAITING, thread_name_prefix="coord-calls")
        self._beat_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="coord-beat")
        filer = ResultFiler(
            state, max_attempts=claude.max_attempts, metrics=metrics, prices=model_prices(claude)
        )
        self._offers = Offers(
            state, filer, io=self._io, park_seconds=claude.park_seconds, monotonic=monotonic
        )
        self._settled = Settled()
        self._sync = SyncCalls(
            state,
            messages or AnthropicMessageClient(claude),
            filer,
            io=self._io,
            settle=self._settle,
            on_permanent=self._offers.fail_jobs,
            on_parked=self._offers.park,
            tag=sync_tag(self.id),
            call_io=self._on(self._calls_pool),
            spool=spool,
        )
        self._polls = BatchPolls(
            state,
            batches,
            filer,
            io=self._io,
            settle=self._settle,
            metrics=metrics,
            deadline=claude.poll_deadline,
            sleep=sleep,
            coordinator_id=self.id,
            leads=lambda: self._recovery.lead,
            look_every=claude.poll_interval,
        )
        creator = BatchCreator(
            state,
            batches,
            io=self._io,
            outage_budget=claude.outage_budget,
            metrics=metrics,
            coordinator_id=self.id,
        )
        self._submitter = Submitter(
            claude,
            state,
            self._offers,
            io=self._io,
            resolve=resolve or _identities,
            spend=SpendGate(state, model_prices(claude)),
            creator=creator,
            sync=self._sync,
            metrics=metrics,
            monotonic=monotonic,
        )
        self._recovery = Recovery(
            self.id,
            claude,
            state,
            io=self._io,
            creator=creator,
            sync=self._sync,
            settle=self._settle,
            monotonic=monotonic,
            beat_io=self._on(self._beat_pool),
        )
        self._loop_task: asyncio.Task[None] | None = None
        self._beat_task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()  # an offer or a flush made a batch due: the next pass is now
        self._sync_passes: set[asyncio.Task[None]] = set()
        self._last_call = monotonic()
        self._delays = poll_backoff(claude.poll_interval).delays()

    # What the driver calls.
    async def offer(
        self, job_id: int, chunks: Mapping[int, Any], mode: ProcessingMode, request_bytes: int
    ) -> None:
        """Hand over a job's prepared chunks (idempotent: a second offer replaces the first)."""
        claude = self._claude
        self._called()
        self._offers.add(Offer(job_id, dict(chunks), mode, request_bytes))
        self._ensure_running()
        if mode == ProcessingMode.SYNC:
            self._send_sync_now()
        elif self._offers.batch_due(
            claude.batch_size, claude.batch_max_requests, megabytes(claude.batch_max_mb), claude.poll_interval
        ):
            self._wake.set()

    async def forget(self, job_ids: Sequence[int]) -> None:
        """Drop payloads of jobs that no longer need them (answered, failed, canceled)."""
        self._called()
        self._offers.forget(job_ids)

    async def flush(self, flush: bool = True) -> None:
        """No more work is coming soon: submit what is prepared without waiting to fill a batch."""
        self._called()
        self._offers.flush = flush
        self._ensure_running()
        if flush and self._offers.unsent:
            self._wake.set()

    async def snapshot(self, settled: int = -1, wait: float = 0.0) -> CoordinatorSnapshot:
        """The backlog and what is in flight; also restarts the loop after an actor restart. Taken
        once more answered jobs than ``settled`` were settled, or after ``wait`` seconds."""
        self._called()
        self._ensure_running()
        await self._settled.after(settled, wait)
        active = await self._io(self._state.active_batches)
        paused = await self._io(self._state.is_paused)
        # The backlog is what still waits for a batch: offers stay here until answered (a retry
        # needs their payloads), but once submitted they must not hold preparation back. The offers
        # keep count of those not sent (a submit pass corrects it from the database now and then).
        return CoordinatorSnapshot(
            offered_jobs=len(self._offers.by_job),
            pending_bytes=sum(self._offers.unsent.values()),
            active_batches=len(active),
            sync_in_flight=len(self._sync.tasks),
            paused=paused,
            parked=self._offers.parked,
            running=self._loop_task is not None and not self._loop_task.done(),
            stopped=self._offers.stopped,
            settled=self._settled.count,
        )

    async def stop(self) -> None:
        """End the loop and wait for synchronous calls under way."""
        for task in (self._loop_task, self._beat_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await asyncio.gather(*self._sync_passes, return_exceptions=True)
        await asyncio.gather(*self._sync.tasks, return_exceptions=True)
        await guarded("retiring", self._io(self._state.retire, self.id))
        for pool in (self._pool, self._calls_pool, self._beat_pool):
            pool.shutdown(wait=False)

    def _called(self) -> None:
        self._last_call = self._monotonic()

    @property
    def idle(self) -> bool:
        """No driver called for COORDINATOR_IDLE_SECONDS and nothing is held: no offer, no call, no
        batch of its own in flight."""
        quiet = self._monotonic() - self._last_call >= self._claude.coordinator_idle_seconds
        held = self._offers.by_job or self._sync.tasks or self._sync.live or self._polls.own_in_flight
        return quiet and not held

    @property
    def _sync_tasks(self) -> set[asyncio.Task[None]]:
        return self._sync.tasks

    def _ensure_running(self) -> None:
        if not self._autostart:
            return
        if self._loop_task is None or self._loop_task.done():
            self._loop_task = asyncio.get_running_loop().create_task(self._run(), name="coordinator-loop")
        if self._beat_task is None or self._beat_task.done():
            self._beat_task = asyncio.get_running_loop().create_task(self._beats(), name="coordinator-beat")

    async def _beats(self) -> None:
        """Beat on time however long a pass takes (a backlog's filing, a slow database call)."""
        while True:
            await self._recovery.beat()
            await asyncio.sleep(self._claude.coordinator_lease_seconds / 6)

    async def _run(self) -> None:
        while True:
            self._wake.clear()  # what wakes the loop during this pass makes the next one start at once
            try:
                busy = await self.step()
            except asyncio.CancelledError:
                raise
            except TransientError as exc:  # an outage (e.g. of the database): a line now and then
                if (down := self._outage.failing()) is not None:
                    log.warning("coordinator passes failing for %.0f s: %s; will try again", down, exc)
                busy = False
            except Exception:  # one bad pass must not end the loop; the DB keeps the truth
                log.exception("coordinator pass failed; will try again")
                busy = False
            else:
                if (down := self._outage.over()) is not None:
                    log.info("coordinator passes work again after %.0f s", down)
            if self.idle and self._on_idle is not None:
                log.info("no driver called for a while and nothing is held: the coordinator exits")
                await guarded("retiring", self._io(self._state.retire, self.id))
                self._on_idle()
                return
            await self._pause(0.2 if busy else next(self._delays))

    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` before the next pass, or less if a batch became due meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    async def step(self) -> bool:
        """One pass: the lead sweeps when due; then submit and poll (its own batches, and the lead
        those of no live coordinator), unless paused. True when work moved."""
        await self._recovery.recover()
        if await self._io(self._state.is_paused):
            return False
        await self._recovery.sweep_when_due()
        await self._sync.file_pending()
        submitted = await self._submitter.submit_phase()
        polled = await self._polls.poll()
        if submitted or polled:
            self._delays = poll_backoff(self._claude.poll_interval).delays()
        return submitted

    def _send_sync_now(self) -> None:
        """Send synchronous work as soon as it is offered, not at the loop's next pass (which may
        be busy polling and filing a backlog's batches)."""
        if not self._autostart or not self._recovery.recovered:
            return
        task = asyncio.get_running_loop().create_task(self._sync_pass(), name="sync-pass")
        self._sync_passes.add(task)
        task.add_done_callback(self._sync_passes.discard)

    async def _settle(self, job_ids: set[int]) -> None:
        """Move jobs on by their filed chunks (``Offers.settle``); a driver waiting hears of it."""
        await self._offers.settle(job_ids)
        self._settled.bump()

    async def _sync_pass(self) -> None:
        try:
            if not await self._io(self._state.is_paused):
                await self._submitter.submit_phase(sync_only=True)
        except Exception:  # the loop's next pass sends it
            log.exception("sending synchronous work failed; the next pass tries again")

    async def _io(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking call on the actor's own pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    @staticmethod
    def _on(pool: ThreadPoolExecutor) -> Io:
        """An ``_io`` running on ``pool``."""

        async def io(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
            return await asyncio.get_running_loop().run_in_executor(pool, lambda: fn(*args, **kwargs))

        return io


async def _identities(values: list[Any]) -> list[Any]:
    """Payloads given as themselves (no Ray): each resolves to itself."""
    return values
