"""Builders for the review tests: a sample bundle answered and written, and a desk over it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raybatch.claude.emulator.rules import answer_from_truth
from raybatch.ids import custom_id, sha256_file
from raybatch.models import ChunkRecord, ChunkStatus, JobStatus, SourceKind, Usage
from raybatch.objects.port import ObjectStore
from raybatch.review.api import ReviewDesk
from raybatch.settings import ClaudeSettings, PrepareSettings, ReviewSettings, StoreSettings
from raybatch.state import SqlStateStore
from raybatch.steps.chunk import plan_chunks
from raybatch.work.writer import ResultWriter

NO_USAGE = Usage()


def writer(state: SqlStateStore, store: ObjectStore, review_below: float = 0.7) -> ResultWriter:
    return ResultWriter(
        state,
        store,
        sources=StoreSettings(),
        prepare=PrepareSettings(),
        claude=ClaudeSettings(),
        review=ReviewSettings(review_below=review_below),
    )


def answered_job(
    state: SqlStateStore,
    folder: Path,
    bundle: dict[str, Any],
    *,
    force: bool = False,
    usage: Usage = NO_USAGE,
) -> int:
    """A job of ``bundle`` whose chunks hold the truth's answers (each bringing ``usage``), ready for
    a writer."""
    path = folder / bundle["file"]
    job, _ = state.register_job(
        sha256=sha256_file(path),
        source_uri=path.as_uri(),
        source_name=bundle["file"],
        kind=SourceKind.PDF,
        size_bytes=path.stat().st_size,
        force=force,
    )
    chunks = [
        ChunkRecord(
            job.id,
            plan.n,
            plan.first,
            plan.last,
            custom_id(job.id, plan.n),
            "k",
            ChunkStatus.SUCCEEDED,
            answer=answer_from_truth(bundle, list(plan.pages)).model_dump_json(),
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
        )
        for plan in plan_chunks(bundle["pages"])
    ]
    state.save_chunks(job.id, chunks)
    state.transition(job.id, [JobStatus.PENDING], JobStatus.ANSWERED, pages=bundle["pages"])
    return job.id


def write_job(state: SqlStateStore, store: ObjectStore, job_id: int, review_below: float = 0.7) -> None:
    """Claim an answered job and write it, as a writer actor would."""
    [lease] = state.claim_jobs(
        worker_id="w",
        from_statuses=[JobStatus.ANSWERED],
        to_status=JobStatus.WRITING,
        lease_seconds=60,
        limit=1,
    )
    assert lease.job_id == job_id
    report = writer(state, store, review_below).write(lease)
    assert report.status is JobStatus.COMPLETED, report.error


def desk(state: SqlStateStore, store: ObjectStore) -> ReviewDesk:
    return ReviewDesk(state, store, writer(state, store))
