"""Writing an answered job in a test, as a writer actor would: a job whose chunks hold a sample
bundle's true answers, claimed, then written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raybatch.claude.emulator.rules import answer_from_truth
from raybatch.ids import custom_id, sha256_file
from raybatch.models import ChunkRecord, ChunkStatus, JobStatus, Lease, SourceKind, Usage
from raybatch.objects import MemoryObjectStore
from raybatch.objects.port import ObjectStore
from raybatch.settings import ClaudeSettings, PrepareSettings, StoreSettings
from raybatch.state import SqlStateStore
from raybatch.steps.chunk import plan_chunks
from raybatch.work.writer import ResultWriter, WriteReport

NO_USAGE = Usage()


def answered_job(
    state: SqlStateStore,
    folder: Path,
    bundle: dict[str, Any],
    *,
    uri: str | None = None,
    force: bool = False,
    usage: Usage = NO_USAGE,
) -> int:
    """A job of ``bundle`` whose chunks hold the truth's answers (each bringing ``usage``), ready for
    a writer (its source read from ``uri`` when given, else from the folder)."""
    path = folder / bundle["file"]
    job, _ = state.register_job(
        sha256=sha256_file(path),
        source_uri=uri or path.as_uri(),
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


def claim_answered(state: SqlStateStore, job_id: int) -> Lease:
    """The answered job's lease, as a writer pool takes it."""
    [lease] = state.claim_jobs(
        worker_id="w",
        from_statuses=[JobStatus.ANSWERED],
        to_status=JobStatus.WRITING,
        lease_seconds=60,
        limit=1,
        job_ids=[job_id],
    )
    return lease


def write_answered(
    state: SqlStateStore, job_id: int, store: ObjectStore | None = None, **parts: Any
) -> WriteReport:
    """Claim the answered job and write it; ``parts`` are the writer's settings sections."""
    sections = {"sources": StoreSettings(), "prepare": PrepareSettings(), "claude": ClaudeSettings()} | parts
    writer = ResultWriter(state, store if store is not None else MemoryObjectStore(), **sections)
    return writer.write(claim_answered(state, job_id))
