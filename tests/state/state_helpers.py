"""Builders shared by the state-store contract tests."""

from __future__ import annotations

from raybatch.ids import custom_id, processing_key
from raybatch.models import ChunkRecord, ChunkStatus, SourceKind


def sha(n: int) -> str:
    """A distinct, valid-looking sha256 for test content number ``n``."""
    return f"{n:064x}"


def register(store, n: int, **kwargs):  # type: ignore[no-untyped-def]
    """Register test content ``n``; returns (job, created)."""
    return store.register_job(
        sha256=sha(n),
        source_uri=f"file:///in/{n}.pdf",
        source_name=kwargs.pop("source_name", f"{n}.pdf"),
        kind=SourceKind.PDF,
        size_bytes=1000 + n,
        **kwargs,
    )


def chunk(job_id: int, n: int, *, key: str = "v1", status: ChunkStatus = ChunkStatus.PREPARED) -> ChunkRecord:
    """Chunk ``n`` of a job: pages 8n+1 .. 8n+8 under prompt version ``key``."""
    return ChunkRecord(
        job_id=job_id,
        n=n,
        first_page=8 * n + 1,
        last_page=8 * n + 8,
        custom_id=custom_id(job_id, n),
        processing_key=processing_key(sha(job_id), n, f"{key}/model"),
        status=status,
        request_bytes=1234,
    )
