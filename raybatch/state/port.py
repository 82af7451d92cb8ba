"""The state store's interface. The database is the source of truth; actors are caches.

Every job transition is one conditional UPDATE; claimed work carries a lease whose token fences
stale owners. Implementations: ``SqlStateStore`` (SQLite file, PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from raybatch.models import (
    BatchStatus,
    ChunkRecord,
    DocumentRecord,
    JobRecord,
    JobStatus,
    Lease,
    PageText,
    ResultType,
    SourceKind,
    Usage,
)


@dataclass(frozen=True)
class BatchRecord:
    """One Message Batch as we know it. ``id`` is ours; ``anthropic_id`` is set once created."""

    id: int
    anthropic_id: str | None
    status: BatchStatus
    request_count: int
    request_bytes: int
    created_at: datetime
    ended_at: datetime | None = None
    counts: Mapping[str, int] | None = None


@dataclass(frozen=True)
class ErrorRecord:
    """One classified failure of a job in a phase."""

    job_id: int | None
    phase: str
    error_class: str
    message: str
    created_at: datetime


class StateStore(Protocol):
    """Jobs, chunks, batches, documents, groups, the OCR cache, errors and the pause flag."""

    # --- jobs -----------------------------------------------------------------------------
    def register_job(
        self,
        *,
        sha256: str,
        source_uri: str,
        source_name: str,
        kind: SourceKind,
        size_bytes: int,
        mode: str = "batch",
        force: bool = False,
    ) -> tuple[JobRecord, bool]:
        """The job for this content, and whether it was created now (same sha256 = same job)."""
        ...

    def get_job(self, job_id: int) -> JobRecord: ...

    def list_jobs(self, statuses: Iterable[JobStatus] | None = None) -> list[JobRecord]: ...

    def count_jobs(self) -> dict[JobStatus, int]: ...

    def claim_jobs(
        self,
        *,
        worker_id: str,
        from_statuses: Iterable[JobStatus],
        to_status: JobStatus,
        lease_seconds: float,
        limit: int,
        job_ids: Iterable[int] | None = None,
    ) -> list[Lease]:
        """Claim up to ``limit`` jobs in ``from_statuses`` (or in ``to_status`` with an expired lease)."""
        ...

    def renew_lease(self, lease: Lease, lease_seconds: float) -> Lease:
        """Extend a lease still held; raises LeaseLost when it was taken over."""
        ...

    def finish_claim(self, lease: Lease, to_status: JobStatus, **fields: Any) -> None:
        """Move a claimed job on and drop the lease; raises LeaseLost for a stale owner."""
        ...

    def transition(
        self, job_id: int, from_statuses: Iterable[JobStatus], to_status: JobStatus, **fields: Any
    ) -> bool:
        """One conditional UPDATE: True when the job was in one of ``from_statuses``."""
        ...

    def fail_job(self, job_id: int, phase: str, error_class: str, message: str) -> bool:
        """Mark a non-terminal job failed, with its reason recorded in errors."""
        ...

    def set_progress(self, progress: Mapping[int, float]) -> None: ...

    # --- chunks ---------------------------------------------------------------------------
    def save_chunks(self, job_id: int, chunks: Sequence[ChunkRecord]) -> None:
        """Upsert a job's chunks by (job, n); answers already succeeded are kept."""
        ...

    def get_chunks(self, job_id: int) -> list[ChunkRecord]: ...

    def mark_chunks_submitted(self, custom_ids: Sequence[str], batch_id: str) -> None: ...

    def file_result(
        self,
        custom_id: str,
        batch_id: str,
        result: ResultType,
        *,
        answer: str | None = None,
        usage: Usage | None = None,
        error_class: str | None = None,
        error_message: str | None = None,
        retry: bool = False,
        max_attempts: int = 3,
    ) -> bool:
        """File one result; False for a duplicate, a stale batch, or an unknown custom_id."""
        ...

    # --- batches --------------------------------------------------------------------------
    def record_batch_intent(self, custom_ids: Sequence[str], request_bytes: int) -> int: ...

    def attach_batch(self, intent_id: int, anthropic_id: str, status: BatchStatus, raw: str) -> None: ...

    def mark_batch_lost(self, intent_id: int) -> None: ...

    def active_batches(self) -> list[BatchRecord]: ...

    def update_batch(
        self, anthropic_id: str, status: BatchStatus, counts: Mapping[str, int], raw: str
    ) -> None: ...

    # --- documents and groups -------------------------------------------------------------
    def upsert_documents(self, job_id: int, documents: Sequence[DocumentRecord]) -> None:
        """Make the job's documents exactly these (by index): reruns never duplicate."""
        ...

    def list_documents(self, job_id: int | None = None) -> list[DocumentRecord]: ...

    def upsert_group(self, key: str, label: str) -> None: ...

    # --- OCR cache ------------------------------------------------------------------------
    def get_page_text(self, sha256: str, page: int, engine: str) -> PageText | None: ...

    def put_page_text(self, sha256: str, engine: str, text: PageText) -> None: ...

    # --- errors and the pause flag --------------------------------------------------------
    def record_error(self, job_id: int | None, phase: str, error_class: str, message: str) -> None: ...

    def list_errors(self, job_id: int | None = None) -> list[ErrorRecord]: ...

    def is_paused(self) -> bool: ...

    def set_paused(self, paused: bool) -> None: ...
