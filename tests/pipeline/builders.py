"""Builders shared by the pipeline tests: jobs with prepared chunks made from the sample plan's text."""

from __future__ import annotations

import asyncio
import contextlib
import io
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PIL import Image

from raybatch.claude.emulator import EmulatorServer
from raybatch.errors import DatabaseUnavailable
from raybatch.ids import sha256_bytes
from raybatch.models import ChunkStatus, JobStatus, PageText, RenderedPage, SourceKind
from raybatch.samples import plan_corpus
from raybatch.settings import ClaudeSettings, Modality
from raybatch.state import SqlStateStore
from raybatch.steps.build_requests import RequestConfig, build_request
from raybatch.steps.chunk import plan_chunks
from raybatch.work.prepared_chunk import PreparedChunk

if TYPE_CHECKING:
    from raybatch.coordinator.coordinator import BatchCoordinator

_BLANK = io.BytesIO()
Image.new("RGB", (32, 45), "white").save(_BLANK, format="JPEG")

SETTLED = (JobStatus.ANSWERED, JobStatus.FAILED)

CONFIG = RequestConfig(model="claude-test", max_tokens=4096, modality=Modality.TEXT, min_confidence=0.8)


@dataclass
class PreparedJob:
    """A registered job whose chunks are saved as prepared, with their payloads."""

    job_id: int
    chunks: dict[int, PreparedChunk]

    @property
    def request_bytes(self) -> int:
        return sum(c.request.encoded_size for c in self.chunks.values())


async def offer(coord: BatchCoordinator, job: PreparedJob, mode: str = "batch") -> None:
    """Offer every chunk of ``job`` to a coordinator, as the driver does."""
    await coord.offer(job.job_id, job.chunks, mode, job.request_bytes)


def claude_settings(emulator: EmulatorServer | str, **overrides: object) -> ClaudeSettings:
    """Claude settings pointed at ``emulator`` (or a URL), polling quickly."""
    url = emulator if isinstance(emulator, str) else emulator.base_url
    values = {"anthropic_base_url": url, "anthropic_api_key": "test-key", "poll_interval": 0.05}
    return ClaudeSettings.model_validate({**values, **overrides})


# The least a job is waited for. Shorter than the coordinator's sweep (SWEEP_INTERVAL, 30 s), so a
# job that only the sweep would send again still fails here.
SETTLE_SECONDS = 20.0


async def run_until(
    coord: BatchCoordinator,
    state: Any,
    job_ids: Sequence[int],
    *,
    passes: int = 200,
    tick: Callable[[], None] | None = None,
) -> None:
    """Step until every job is answered or failed; ``tick`` runs between passes (e.g. a clock).
    Gives up after ``passes`` passes and SETTLE_SECONDS, whichever comes later: a loaded machine
    slows the calls a pass waits for, not what the coordinator does."""
    started, done = time.monotonic(), 0
    while done < passes or time.monotonic() - started < SETTLE_SECONDS:
        done += 1
        with contextlib.suppress(DatabaseUnavailable):  # the coordinator's own loop logs it and goes on
            await coord.step()
        if all(state.get_job(j).status in SETTLED for j in job_ids):
            await asyncio.gather(*coord._sync.tasks)
            return
        if tick is not None:
            tick()
        await asyncio.sleep(0.02)
    chunks = {
        j: [(c.custom_id, c.status.value, c.batch_id, c.attempts) for c in state.get_chunks(j)]
        for j in job_ids
    }
    jobs = [(j, state.get_job(j).status.value) for j in job_ids]
    waited = time.monotonic() - started
    raise AssertionError(f"jobs not settled after {done} passes, {waited:.1f} s: {jobs}; chunks {chunks}")


async def settle(coord: BatchCoordinator, state: Any, job: PreparedJob, mode: str = "batch") -> None:
    """Offer ``job`` to ``coord``, step it until the job is answered or failed, and stop it."""
    await offer(coord, job, mode)
    await coord.flush()
    await run_until(coord, state, [job.job_id])
    await coord.stop()


async def send_and_stop(coord: BatchCoordinator, job: PreparedJob) -> None:
    """Offer ``job``, step once (its batch is created) and stop: a coordinator that then goes away."""
    await offer(coord, job)
    await coord.flush()
    await coord.step()
    await coord.stop()


def bundle_texts(bundle: int = 0, seed: int = 7) -> list[str]:
    """The printed text of every page of one planned sample bundle."""
    plan = plan_corpus(max(bundle + 1, 2), seed)
    return [page.text for doc in plan.bundles[bundle].documents for page in doc.pages]


def prepared_job(
    state: SqlStateStore,
    texts: Sequence[str],
    *,
    name: str,
    mode: str = "batch",
    config: RequestConfig = CONFIG,
) -> PreparedJob:
    """Register a job for ``texts`` and save its chunks as prepared (text-only requests)."""
    sha = sha256_bytes(f"{name}:{len(texts)}".encode())
    job, _ = state.register_job(
        sha256=sha,
        source_uri=f"file:///{name}",
        source_name=name,
        kind=SourceKind.PDF,
        size_bytes=1000,
        mode=mode,
    )
    state.transition(job.id, [JobStatus.PENDING], JobStatus.PREPARED, pages=len(texts))
    chunks: dict[int, PreparedChunk] = {}
    for plan in plan_chunks(len(texts)):
        pages = [
            RenderedPage(p, _BLANK.getvalue(), "image/jpeg", 32, 45, PageText(p, texts[p - 1], "layer"))
            for p in plan.pages
        ]
        request = build_request(job.id, plan.n, sha, pages, config=config)
        chunks[plan.n] = PreparedChunk(request, {p: 0 for p in plan.pages})
    state.save_chunks(job.id, [c.record() for c in chunks.values()])
    assert {c.status for c in state.get_chunks(job.id)} == {ChunkStatus.PREPARED}
    return PreparedJob(job.id, chunks)
