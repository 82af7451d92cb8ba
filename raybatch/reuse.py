"""Answers reused exactly when they would be the same.

A chunk's processing key covers its source bytes, its place, and everything that changes its request
(``RequestConfig``: model, prompt version, modality, OCR engine and version, image size and format,
and whether the emulator answers). So:

- a chunk that already succeeded under the key it would get now is done, and is not prepared again;
- a chunk whose key matches an answer held by any job (``--force``, the same file registered again)
  takes that answer without a request: ``reused_from`` names where it came from, it costs nothing;
- a chunk whose key changed (another model, modality, OCR engine, an emulated answer now that a key
  is set) is prepared and sent again; a completed job with such a chunk is reopened.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from raybatch.ids import custom_id
from raybatch.models import REDO_FRESH, ChunkRecord, ChunkStatus, JobRecord, JobStatus
from raybatch.ocr import open_ocr
from raybatch.settings import OcrSettings, PrepareSettings, RequestSettings, Settings
from raybatch.steps.build_requests import RequestConfig, request_config
from raybatch.steps.chunk import ChunkPlan, plan_chunks

if TYPE_CHECKING:  # a type only: prepare tasks import this module, and no database driver
    from raybatch.state.port import JobsWithChunks

KeyOf = Callable[[JobRecord, int], str]


def settings_config(settings: Settings) -> RequestConfig:
    """The request configuration a run with these settings prepares under (the OCR engine resolved
    here as the prepare workers resolve it; building an engine loads no model)."""
    ocr = open_ocr(settings.section(OcrSettings))
    return request_config(
        settings.section(PrepareSettings),
        settings.section(RequestSettings),
        settings.ocr_min_confidence,
        ocr.name if ocr is not None else "none",
    )


def outstanding(
    state: JobsWithChunks, job: JobRecord, key_of: KeyOf, *, any_answered: bool = True
) -> list[ChunkPlan]:
    """The chunks of ``job`` that must be prepared and sent; answers already held (by this job or
    another under the same key) are filed as reused. ``any_answered=False``: the caller knows no
    chunk of this job succeeded, so its chunks are not read."""
    return outstanding_of(state, [(job, any_answered)], key_of)[job.id]


def outstanding_of(
    state: JobsWithChunks, jobs: Sequence[tuple[JobRecord, bool]], key_of: KeyOf
) -> dict[int, list[ChunkPlan]]:
    """``outstanding`` of several jobs (each with its ``any_answered``), answers looked up at once."""
    todo: dict[int, list[tuple[ChunkPlan, str]]] = {}
    for job, any_answered in jobs:
        held = {c.n: c for c in state.get_chunks(job.id)} if any_answered else {}
        keyed = [(plan, key_of(job, plan.n)) for plan in plan_chunks(job.pages or 0)]
        todo[job.id] = [(plan, key) for plan, key in keyed if not _done(held.get(plan.n), key)]
    cached = [key for job, _ in jobs if job.error_class != REDO_FRESH for _, key in todo[job.id]]
    answers = state.answers_for(cached)  # ``raybatch redo --fresh`` goes past the answer cache
    for job, _ in jobs:
        answers_of = {} if job.error_class == REDO_FRESH else answers
        reused = [_reused(job, plan, key, answers_of[key]) for plan, key in todo[job.id] if key in answers_of]
        if reused:
            state.save_chunks(job.id, reused)
    fresh = {job.id for job, _ in jobs if job.error_class == REDO_FRESH}
    return {
        job_id: [plan for plan, key in keyed if job_id in fresh or key not in answers]
        for job_id, keyed in todo.items()
    }


def reopen_changed(state: JobsWithChunks, jobs: Sequence[JobRecord], key_of: KeyOf) -> list[int]:
    """Completed jobs with a chunk whose key changed go back to pending; their ids."""
    reopened = []
    for job in jobs:
        if job.status is not JobStatus.COMPLETED:
            continue
        held = {c.n: c for c in state.get_chunks(job.id)}
        plans = plan_chunks(job.pages or 0)
        if all(_done(held.get(p.n), key_of(job, p.n)) for p in plans):
            continue
        if state.transition(job.id, [JobStatus.COMPLETED], JobStatus.PENDING, progress=0.0):
            reopened.append(job.id)
    return reopened


def _done(chunk: ChunkRecord | None, key: str) -> bool:
    return chunk is not None and chunk.status is ChunkStatus.SUCCEEDED and chunk.processing_key == key


def _reused(job: JobRecord, plan: ChunkPlan, key: str, source: ChunkRecord) -> ChunkRecord:
    """Chunk ``plan`` of ``job`` answered by ``source``'s answer: no request, no tokens."""
    return ChunkRecord(
        job_id=job.id,
        n=plan.n,
        first_page=plan.first,
        last_page=plan.last,
        custom_id=custom_id(job.id, plan.n),
        processing_key=key,
        status=ChunkStatus.SUCCEEDED,
        answer=source.answer,
        rotations=dict(source.rotations),
        emulated=source.emulated,
        reused_from=source.reused_from or source.custom_id,
    )
