"""Writing an answered job in a test, as a writer actor would: claim it, then write it."""

from __future__ import annotations

from typing import Any

from raybatch.models import JobStatus
from raybatch.objects import MemoryObjectStore
from raybatch.objects.port import ObjectStore
from raybatch.settings import ClaudeSettings, PrepareSettings, StoreSettings
from raybatch.state import SqlStateStore
from raybatch.work.writer import ResultWriter, WriteReport


def write_answered(
    state: SqlStateStore, job_id: int, store: ObjectStore | None = None, **parts: Any
) -> WriteReport:
    """Claim the answered job and write it; ``parts`` are the writer's settings sections."""
    [lease] = state.claim_jobs(
        worker_id="w",
        from_statuses=[JobStatus.ANSWERED],
        to_status=JobStatus.WRITING,
        lease_seconds=60,
        limit=1,
        job_ids=[job_id],
    )
    sections = {"sources": StoreSettings(), "prepare": PrepareSettings(), "claude": ClaudeSettings()} | parts
    writer = ResultWriter(state, store if store is not None else MemoryObjectStore(), **sections)
    return writer.write(lease)
