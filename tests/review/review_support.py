"""Builders for the review tests: a sample bundle answered and written, and a desk over it."""

from __future__ import annotations

from writing import answered_job, claim_answered

from raybatch.models import JobStatus
from raybatch.objects.port import ObjectStore
from raybatch.review.api import ReviewDesk
from raybatch.settings import ClaudeSettings, PrepareSettings, ReviewSettings, StoreSettings
from raybatch.state import SqlStateStore
from raybatch.work.writer import ResultWriter

__all__ = ["answered_job", "desk", "write_job", "writer"]


def writer(state: SqlStateStore, store: ObjectStore, review_below: float = 0.7) -> ResultWriter:
    return ResultWriter(
        state,
        store,
        sources=StoreSettings(),
        prepare=PrepareSettings(),
        claude=ClaudeSettings(),
        review=ReviewSettings(review_below=review_below),
    )


def write_job(state: SqlStateStore, store: ObjectStore, job_id: int, review_below: float = 0.7) -> None:
    """Claim an answered job and write it, as a writer actor would."""
    lease = claim_answered(state, job_id)
    report = writer(state, store, review_below).write(lease)
    assert report.status is JobStatus.COMPLETED, report.error


def desk(state: SqlStateStore, store: ObjectStore) -> ReviewDesk:
    return ReviewDesk(state, store, writer(state, store))
