"""The coordinator's submit phase: offered jobs the database holds as prepared are sent, urgent ones
at once as synchronous calls, the others packed into batches once a batch is due.

A batch is due when the driver flushes, a full batch waits (BATCH_MAX_REQUESTS jobs or
BATCH_MAX_MB), BATCH_SIZE jobs wait and none of this coordinator's batches went out in the last
POLL_INTERVAL, or the oldest offer waited POLL_INTERVAL. A pass then takes every job that waits, up
to BATCH_MAX_REQUESTS of them and the one that fills BATCH_MAX_MB (what it resolves stays about a
batch): a backlog goes out in full batches rather than many of BATCH_SIZE (each batch costs a
create, its polls while it runs and a results fetch), a stream of prepared jobs in one batch a
POLL_INTERVAL rather than one a pass, and a trickle still goes in small ones. The spend gate
admits what the cap allows; a job whose payloads are gone goes back to be prepared again; a request
larger than a batch may be fails its job. One submit phase runs at a time, so nothing is sent twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from raybatch.claude.records import PreparedRequest
from raybatch.coordinator.answer_budget import with_answer_budget
from raybatch.coordinator.batch_create import BatchCreator, Io
from raybatch.coordinator.offers import Offer, Offers
from raybatch.coordinator.sync_calls import SyncCalls
from raybatch.errors import (
    AuthenticationFailed,
    InvalidRequest,
    OutagePastBudget,
    PermanentError,
    SpendLimitReached,
    TransientError,
)
from raybatch.metrics import Metrics
from raybatch.models import ChunkStatus, JobStatus, Priority, ProcessingMode
from raybatch.settings import ClaudeSettings
from raybatch.spend import SpendGate
from raybatch.state.port import JobGlance, StateStore
from raybatch.steps.pack import ENVELOPE_BYTES, megabytes, pack
from raybatch.units import MB

log = logging.getLogger(__name__)

RESOLVE_SECONDS = 120.0  # a prepared payload not readable by then is treated as lost


class Submitter:
    """Sends what is due: synchronous calls at once, batches when full or waited long enough."""

    def __init__(
        self,
        claude: ClaudeSettings,
        state: StateStore,
        offers: Offers,
        *,
        io: Io,
        resolve: Callable[[list[Any]], Awaitable[list[Any]]],
        spend: SpendGate,
        creator: BatchCreator,
        sync: SyncCalls,
        metrics: Metrics,
        monotonic: Callable[[], float],
    ) -> None:
        self._claude = claude
        self._state = state
        self._offers = offers
        self._io = io
        self._resolve = resolve
        self._spend = spend
        self._creator = creator
        self._sync = sync
        self._metrics = metrics
        self._monotonic = monotonic
        self._submitting = asyncio.Lock()  # one submit phase at a time: nothing is sent twice
        self._capped = False  # the last pass's jobs were all held by the spend cap

    async def submit_phase(self, *, sync_only: bool = False) -> bool:
        """Send what is due, then settle the jobs sent; True when something was done."""
        # Jobs are settled after the lock is let go: a synchronous pass waits only for the sending.
        async with self._submitting:
            sent = await self._submit(sync_only)
        if sent:
            await self._offers.settle(sent)
        return sent is not None

    async def _submit(self, sync_only: bool) -> set[int] | None:
        """Send what is due; the jobs to settle now (None: nothing was done)."""
        if self._offers.parked:
            return None
        offers, sync_ids = await self._ready_offers(sync_only)
        if offers and self._offers.stopped is not None:
            await self._offers.fail_jobs(
                {o.job_id for o in offers}, AuthenticationFailed(self._offers.stopped)
            )
            return set()
        if offers and (sync_only or not self._due(offers)):  # synchronous work never waits for a batch
            offers = [o for o in offers if o.job_id in sync_ids]
        if not offers:
            return None
        requests = await self._requests_for(offers)
        requests, held = await self._io(self._spend.admit, requests, sync_ids)
        self._capped = bool(held) and not requests
        if self._capped:
            return None  # parked by the spend cap until it is raised
        sync = [r for r in requests if r.job_id in sync_ids]
        batch = [r for r in requests if r.job_id not in sync_ids]
        if sync:
            await self._sync.start(sync)
            self._metrics.sync_sent(len(sync))
        created = await self._submit_batches(batch) if batch else set()
        if created:
            self._offers.batch_at = self._monotonic()
        if batch or not self._offers.by_job:  # a synchronous send does not restart a batch's wait
            self._offers.first_at = self._monotonic() if self._offers.by_job else None
        # Those held by the spend cap, parked or whose create was interrupted wait on, as far as it knows.
        self._offers.sent({r.job_id for r in sync} | created)
        return {o.job_id for o in offers}

    async def _ready_offers(self, sync_only: bool) -> tuple[list[Offer], set[int]]:
        """Offered jobs the DB holds as prepared, urgent first, then oldest first, as many as a pass
        takes; and those to send synchronously (the DB's mode: a job made urgent after it was
        offered goes synchronously). A synchronous pass asks about the synchronous offers only."""
        held = self._offers.by_job
        if not held:
            return [], set()
        take = self._pass_jobs()
        looked_at = self._offers.to_look_at(0 if sync_only else take)
        glanced = await self._io(self._state.glance_jobs, looked_at)
        waiting = sorted(  # those let go of while the database was asked (answered, failed) are not
            (j for j in glanced if j.status is JobStatus.PREPARED and j.id in held),
            key=lambda j: (j.priority is not Priority.URGENT, j.id),
        )
        self._offers.sent(j.id for j in glanced if j.status is not JobStatus.PREPARED)  # sent before
        self._offers.waiting(j.id for j in waiting if j.id not in self._offers.unsent)  # sent back
        jobs: list[JobGlance] = []
        size, most_bytes = 0, megabytes(self._claude.batch_max_mb)
        for job in waiting:  # up to the job that fills a batch's bytes: a pass sends at most one more
            if len(jobs) >= take or size >= most_bytes:
                break
            jobs.append(job)
            size += held[job.id].request_bytes
        return [held[j.id] for j in jobs], {j.id for j in jobs if j.mode is ProcessingMode.SYNC}

    def _pass_jobs(self) -> int:
        """Jobs a pass takes: every one that waits to be sent, at least BATCH_SIZE, at most a
        batch's BATCH_MAX_REQUESTS (each job is one request or more) and, in ``_ready_offers``, up
        to the one that fills BATCH_MAX_MB. While the spend cap held all of the last pass, BATCH_SIZE:
        a pass that tries whether the cap was raised resolves no whole backlog."""
        if self._capped:
            return self._claude.batch_size
        most = max(self._claude.batch_size, self._claude.batch_max_requests)
        return min(max(self._claude.batch_size, len(self._offers.unsent)), most)

    def _due(self, offers: Sequence[Offer]) -> bool:
        """Submit when the driver flushes, a batch is full, BATCH_SIZE jobs wait and no batch went
        out for POLL_INTERVAL, or the oldest offer waited POLL_INTERVAL."""
        claude = self._claude
        if self._offers.flush or len(offers) >= claude.batch_max_requests:
            return True
        if sum(o.request_bytes for o in offers) >= megabytes(claude.batch_max_mb):
            return True
        if len(offers) >= claude.batch_size and self._offers.spaced(claude.poll_interval):
            return True
        waited = self._monotonic() - (self._offers.first_at or self._monotonic())
        return waited >= claude.poll_interval

    async def _requests_for(self, offers: Sequence[Offer]) -> list[PreparedRequest]:
        """The requests still owed an answer (prepared or to retry), resolved from their handles."""
        requests: list[PreparedRequest] = []
        creating = await self._io(self._state.intent_chunk_ids)  # may be in a batch already
        chunks_of = await self._io(self._state.chunks_of, [o.job_id for o in offers])  # in one read
        owed = {
            offer.job_id: [
                c.n
                for c in chunks_of[offer.job_id]
                if c.status in (ChunkStatus.PREPARED, ChunkStatus.RETRY) and c.custom_id not in creating
            ]
            for offer in offers
        }
        payloads = await self._payloads(offers, owed)
        limit = self._claude.max_tokens_limit
        for offer in offers:
            if offer.job_id not in payloads:
                continue  # sent back to be prepared again
            by_n = {c.n: c for c in chunks_of[offer.job_id]}
            for n, p in zip(owed[offer.job_id], payloads[offer.job_id], strict=True):
                request = p.request if hasattr(p, "request") else p
                requests.append(with_answer_budget(request, by_n.get(n), limit))
        return requests

    async def _payloads(self, offers: Sequence[Offer], owed: Mapping[int, list[int]]) -> dict[int, list[Any]]:
        """The payloads each job owes, resolved all at once; should that fail, job by job. A job
        whose payloads are gone (its driver died, or a chunk was never offered) is sent back to be
        prepared again instead of blocking the pass."""
        with contextlib.suppress(Exception):  # a job's payloads are gone: found below, job by job
            handles = [offer.chunks[n] for offer in offers for n in owed[offer.job_id]]
            values = iter(await asyncio.wait_for(self._resolve(handles), RESOLVE_SECONDS))
            return {offer.job_id: [next(values) for _ in owed[offer.job_id]] for offer in offers}
        found: dict[int, list[Any]] = {}
        for offer in offers:
            try:
                mine = [offer.chunks[n] for n in owed[offer.job_id]]
                found[offer.job_id] = await asyncio.wait_for(self._resolve(mine), RESOLVE_SECONDS)
            except Exception as exc:  # KeyError, or Ray's OwnerDiedError / ObjectLostError
                log.warning("job %d: prepared payloads unavailable (%s); prepared again", offer.job_id, exc)
                self._offers.forget([offer.job_id])
                await self._io(self._state.transition, offer.job_id, [JobStatus.PREPARED], JobStatus.PENDING)
        return found

    async def _submit_batches(self, requests: Sequence[PreparedRequest]) -> set[int]:
        """Pack the requests into batches and create them; the jobs whose batch was created."""
        max_bytes = megabytes(self._claude.batch_max_mb)
        too_large = [r for r in requests if ENVELOPE_BYTES + r.encoded_size > max_bytes]
        for request in too_large:
            reason = (
                f"chunk {request.n} is {request.encoded_size / MB:.1f} MB as a request: "
                f"larger than a batch may be (BATCH_MAX_MB={self._claude.batch_max_mb})"
            )
            await self._offers.fail_jobs({request.job_id}, InvalidRequest(reason))
        refused = {r.job_id for r in too_large}
        fitting = [r for r in requests if r.job_id not in refused]
        groups = pack(fitting, max_bytes=max_bytes, max_requests=self._claude.batch_max_requests)
        created: set[int] = set()
        for group in groups:
            try:
                await self._creator.create(group)
            except SpendLimitReached:
                self._offers.park("spend limit reached")
                break
            except OutagePastBudget as exc:
                self._offers.park(f"the API is unavailable: {exc}")
                break
            except PermanentError as exc:
                await self._offers.fail_jobs({r.job_id for r in group}, exc)
            except TransientError as exc:
                log.warning("batch create interrupted, the sweep reconciles it: %s", exc)
            else:
                created.update(r.job_id for r in group)
        return created
