"""Estimate: what a source will cost before anything is sent to the model.

Registers the source and prepares it on Ray as a run would (render, OCR, build requests), then counts
each request's input tokens with the token-counting endpoint (``POST /v1/messages/count_tokens``,
not billed). A large backlog is counted on a sample of ``sample`` requests spread evenly over it, and
the total is extrapolated by pages (the report says so). Output tokens are expected at
``EXPECTED_OUTPUT_TOKENS_PER_PAGE``. Costs come from ``raybatch.cost.cost_usd`` at batch and at sync
prices; the saving from ``PAGE_MODALITY`` is what the pages sent as text alone would have cost as
images (about ``IMAGE_TOKEN_CAP`` tokens each). Every prepared request is kept in the object store
(by this driver: the prepare tasks hold no store keys), so the run that follows prepares nothing again.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import ray

from raybatch.claude.emulator.tokens import IMAGE_TOKEN_CAP
from raybatch.claude.records import PreparedRequest
from raybatch.claude.sync_client import AnthropicMessageClient
from raybatch.cost import EXPECTED_OUTPUT_TOKENS_PER_PAGE, PRICES_SOURCE, PRICES_TAKEN, cost_usd
from raybatch.loops.scheduler import PrepareScheduler, ReadyJob
from raybatch.models import ChunkStatus, JobRecord, JobStatus, ProcessingMode, Usage
from raybatch.pipeline import Notice, _prepare_cap, claude_endpoint, register_source
from raybatch.prepared import PreparedRequests, kept_requests
from raybatch.settings import ClaudeSettings, Settings, model_prices
from raybatch.shells.runtime import connect
from raybatch.shells.tasks import RayPrepareTasks
from raybatch.state.port import ChunkStates, JobStates, StateStore
from raybatch.steps.chunk import plan_chunks
from raybatch.steps.pack import megabytes, pack
from raybatch.work.prepared_chunk import PreparedChunk

log = logging.getLogger(__name__)

DEFAULT_SAMPLE = 200  # requests counted at most; the rest is extrapolated
_OWED = (ChunkStatus.PREPARED, ChunkStatus.RETRY)


@dataclass
class Tally:
    """What the prepared requests add up to, and what the counted ones said."""

    every: int = 1  # count one request in ``every``
    requests: int = 0
    pages: int = 0
    text_pages: int = 0  # pages sent as text alone, without their image
    counted: int = 0
    counted_pages: int = 0
    counted_tokens: int = 0
    sizes: list[PreparedRequest] = field(default_factory=list)  # params dropped: for packing only

    def add(self, request: PreparedRequest, count: Any) -> None:
        """One prepared request; ``count`` gives its input tokens when it is in the sample."""
        pages = request.last_page - request.first_page + 1
        images = sum(1 for b in request.params["messages"][0]["content"] if b.get("type") == "image")
        if self.requests % self.every == 0:
            self.counted += 1
            self.counted_pages += pages
            self.counted_tokens += count(request)
        self.requests += 1
        self.pages += pages
        self.text_pages += pages - images
        self.sizes.append(replace(request, params_json="{}"))

    @property
    def input_tokens(self) -> int:
        """The input tokens of every request: counted, or extrapolated from the sample by pages."""
        if self.counted == self.requests or not self.counted_pages:
            return self.counted_tokens
        return round(self.counted_tokens * self.pages / self.counted_pages)


def estimate(
    settings: Settings,
    source: str | Sequence[str],
    *,
    sample: int = DEFAULT_SAMPLE,
    notice: Notice = log.info,
    dashboard: bool = True,
) -> dict[str, Any]:
    """Register and prepare ``source`` without sending it; what it will take and cost, as a dict."""
    settings.require_claude()
    state, listing, jobs = register_source(settings, source, force=False, notice=notice)
    open_jobs = _reopen_prepared(state, jobs)
    owns_ray = connect(settings, dashboard=dashboard)
    try:
        with claude_endpoint(settings, notice) as (settings, _):
            tally = _prepare_and_count(settings, state, open_jobs, sample)
    finally:
        if owns_ray:
            ray.shutdown()
    report = _report(settings, tally, state, open_jobs)
    return {"files": len(listing.files), "jobs": len(jobs), "jobs_to_send": len(open_jobs), **report}


def _reopen_prepared(state: JobStates, jobs: Sequence[JobRecord]) -> list[JobRecord]:
    """The jobs still to send; those prepared earlier go back to pending (their work is kept)."""
    for job in jobs:
        if job.status is JobStatus.PREPARED:
            state.transition(job.id, [JobStatus.PREPARED], JobStatus.PENDING)
    live = (JobStatus.PENDING, JobStatus.PREPARING, JobStatus.PREPARED)
    return [j for j in state.get_jobs([j.id for j in jobs]) if j.status in live]


def _prepare_and_count(
    settings: Settings, state: StateStore, jobs: Sequence[JobRecord], sample: int
) -> Tally:
    expected = sum(len(plan_chunks(j.pages or 0)) for j in jobs)
    tally = Tally(every=max(1, math.ceil(expected / max(sample, 1))))
    kept = kept_requests(settings, state)
    scheduler = PrepareScheduler(
        state,
        RayPrepareTasks(settings, cache=state, kept=kept),
        worker_id=f"estimate-{uuid.uuid4().hex[:8]}",
        max_in_flight=_prepare_cap(settings),
        max_backlog_bytes=2 * megabytes(settings.batch_max_mb),
        lease_seconds=settings.lease_seconds,
        max_attempts=settings.prepare_max_attempts,
        timeout=settings.prepare_timeout,
    )
    scheduler.claim(j.id for j in jobs)
    renewed = time.monotonic()
    with AnthropicMessageClient(settings.section(ClaudeSettings)) as client:
        while not scheduler.idle:
            for ready in scheduler.tick(0):
                _count_job(state, ready, tally, client.count_tokens, kept)
            if time.monotonic() - renewed > settings.lease_seconds / 4:
                held = state.renew_leases(scheduler.leases, settings.lease_seconds)
                scheduler.renewed({lease.job_id: lease for lease in held})
                renewed = time.monotonic()
            time.sleep(0.1)
    return tally


def _count_job(state: ChunkStates, ready: ReadyJob, tally: Tally, count: Any, kept: PreparedRequests) -> None:
    owed = {c.n for c in state.get_chunks(ready.job_id) if c.status in _OWED}
    for n in sorted(owed & set(ready.payloads)):
        chunk: PreparedChunk = ray.get(ready.payloads[n])
        kept.save(chunk)  # the run that follows sends it without preparing it again
        tally.add(chunk.request, count)


def _report(
    settings: Settings, tally: Tally, state: ChunkStates, jobs: Sequence[JobRecord]
) -> dict[str, Any]:
    prices = model_prices(settings)
    output = tally.pages * EXPECTED_OUTPUT_TOKENS_PER_PAGE
    usage = Usage(input_tokens=tally.input_tokens, output_tokens=output)
    as_images = replace(usage, input_tokens=usage.input_tokens + tally.text_pages * IMAGE_TOKEN_CAP)
    modes = {j.mode for j in jobs} or {settings.processing_mode}
    batch = cost_usd({ProcessingMode.BATCH: usage}, prices)
    sync = cost_usd({ProcessingMode.SYNC: usage}, prices)
    batches = pack(
        tally.sizes,
        max_bytes=megabytes(settings.batch_max_mb),
        max_requests=settings.batch_max_requests,
    )
    reused = state.request_totals([j.id for j in jobs]).reused
    return {
        "pages": sum(j.pages or 0 for j in jobs),
        "requests": tally.requests,
        "requests_reused": reused,
        "batches": len(batches) if ProcessingMode.BATCH in modes else 0,
        "input_tokens": usage.input_tokens,
        "input_tokens_counted": tally.counted_tokens,
        "requests_counted": tally.counted,
        "extrapolated": tally.counted < tally.requests,
        "expected_output_tokens": output,
        "model": settings.claude_model,
        "modality": settings.page_modality.value,
        "mode": settings.processing_mode.value,
        "cost_batch_usd": batch,
        "cost_sync_usd": sync,
        "cost_usd": batch if settings.processing_mode is ProcessingMode.BATCH else sync,
        "saving_batching_usd": round(sync - batch, 6),
        "cost_images_batch_usd": cost_usd({ProcessingMode.BATCH: as_images}, prices),
        "saving_modality_usd": round(cost_usd({ProcessingMode.BATCH: as_images}, prices) - batch, 6),
        "pages_as_text": tally.text_pages,
        "prices": {**vars(prices), "taken": PRICES_TAKEN, "source": PRICES_SOURCE},
        "emulated": settings.uses_emulator,
    }
