"""The coordinator's lease and recovery sweep.

Several coordinators may share one database. Each beats in it a few times a lease; only the lead
(the one holding the lease: the newest live coordinator) sweeps, at start and every
SWEEP_INTERVAL: intents never attached are adopted or dropped, chunks held by no live batch or call
go again, and jobs whose status lags their chunks are settled. So every window a crash or a
database error can open closes by itself.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from raybatch.coordinator.batch_create import BatchCreator, Io
from raybatch.coordinator.sync_calls import SYNC_BATCH, SyncCalls
from raybatch.models import BatchStatus
from raybatch.settings import ClaudeSettings
from raybatch.state.port import BatchRecord, StateStore

log = logging.getLogger(__name__)


async def guarded(what: str, work: Awaitable[None]) -> None:
    """Await ``work``; a failure is logged, to be tried again later, and never raised."""
    try:
        await work
    except Exception as exc:
        log.warning("recovery: %s failed, will try again: %s", what, exc)


class Recovery:
    """Beats for one coordinator, learns whether it leads, and sweeps while it does."""

    def __init__(
        self,
        coordinator_id: str,
        claude: ClaudeSettings,
        state: StateStore,
        *,
        io: Io,
        creator: BatchCreator,
        sync: SyncCalls,
        settle: Callable[[set[int]], Awaitable[None]],
        monotonic: Callable[[], float],
        beat_io: Io | None = None,
    ) -> None:
        self._id = coordinator_id
        self._beat_io = beat_io or io  # a thread of the beat's own: never queued behind calls
        self._claude = claude
        self._state = state
        self._io = io
        self._creator = creator
        self._sync = sync
        self._settle = settle
        self._monotonic = monotonic
        self.lead = False
        self.recovered = False  # the lead swept once since it took the lease
        self._next_beat = 0.0
        self._next_sweep = 0.0

    async def recover(self) -> None:
        """Beat when due; a coordinator that has just become the lead sweeps first."""
        await self.beat()
        if self.lead and not self.recovered:
            await self.sweep()
            self.recovered = True

    async def sweep_when_due(self) -> None:
        """The lead sweeps every SWEEP_INTERVAL."""
        if self.lead and self._monotonic() >= self._next_sweep:
            await self.sweep()

    async def beat(self) -> None:
        """Say this coordinator is alive and learn whether it leads (a few times a lease)."""
        if self._monotonic() < self._next_beat:
            return
        lease = self._claude.coordinator_lease_seconds
        try:
            lead = await self._beat_io(self._state.beat, self._id, lease)
        except Exception as exc:  # the database away: keep the last answer, try again soon
            log.warning("coordinator heartbeat failed, will try again: %s", exc)
            self._next_beat = self._monotonic() + 1.0
            return
        self._next_beat = self._monotonic() + lease / 3
        if lead and not self.lead:
            log.info("coordinator %s leads: it sweeps and polls", self._id)
            self.recovered = False  # a new lead recovers what the last one left
        elif self.lead and not lead:
            log.info("coordinator %s no longer leads: it finishes its own batches and calls", self._id)
        self.lead = lead

    async def sweep(self) -> None:
        """Close every window a crash or an error left open; the DB says what is in flight.

        Each part stands alone: one that fails (the API or the database away) is logged and
        tried again at the next sweep, and never holds up the others or the pass.
        """
        self._next_sweep = self._monotonic() + self._claude.sweep_interval
        await guarded("recording created batches", self._creator.record_created())
        for record in await self._io(self._state.active_batches):
            if record.status is BatchStatus.CREATING:
                await guarded(f"reconciling intent {record.id}", self._reconcile(record))
        await guarded("releasing requests nothing holds", self._release_unheld())
        await guarded("settling jobs", self._settle_lagging())

    async def _reconcile(self, record: BatchRecord) -> None:
        if await self._creator.reconcile(record):
            await self._settle(set(await self._io(self._state.batch_jobs, record.id)))

    async def _release_unheld(self) -> None:
        """Sync calls no task runs any more (this coordinator's, or any of one that stopped beating)
        go back to prepared, once the spooled answers are filed; chunks of batches no longer in
        flight go again."""
        await self._sync.file_spooled()  # first: a spooled answer's chunk is paid, never sent again
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
