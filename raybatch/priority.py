"""Making registered jobs urgent, and what that changes for a job in each status.

A job not yet sent (pending, preparing, prepared) becomes urgent and goes to Claude synchronously,
ahead of every normal job. A job whose requests are in a live Message Batch stays there: the
Message Batches API cancels whole batches only, never single requests, so ``pull`` cannot take it
out; it is written first once answered. Answered and writing jobs are written first; a failed one
is urgent when ``raybatch retry`` takes it up again; completed and canceled jobs are left alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from raybatch.models import JobRecord, JobStatus, Priority
from raybatch.state.port import JobsWithChunks

NO_SINGLE_CANCEL = (
    "the Message Batches API cannot cancel single requests (only a whole batch, which would hold "
    "back every other job in it)"
)


@dataclass(frozen=True)
class Outcome:
    """What asking for one job to be urgent did."""

    job_id: int
    changed: bool
    message: str


def source_uri(source: str) -> str:
    """A source as jobs record it: an s3:// prefix as given, a local path as a file URI."""
    return source if source.startswith("s3://") else Path(source).resolve().as_uri()


def make_urgent(state: JobsWithChunks, job_ids: Iterable[int], *, pull: bool = False) -> list[Outcome]:
    """Make these jobs urgent where that can still change anything; one outcome per job."""
    jobs = state.get_jobs(job_ids)
    changed = set(state.set_priority([j.id for j in jobs], Priority.URGENT))
    return [_outcome(state, job, job.id in changed, pull) for job in jobs]


def _outcome(state: JobsWithChunks, job: JobRecord, changed: bool, pull: bool) -> Outcome:
    status = job.status
    if status in (JobStatus.PENDING, JobStatus.PREPARING, JobStatus.PREPARED):
        return Outcome(job.id, changed, "urgent: sent synchronously, ahead of normal jobs")
    if status is JobStatus.SUBMITTED:
        return Outcome(job.id, changed, _in_batch(state, job.id, pull))
    if status in (JobStatus.ANSWERED, JobStatus.WRITING):
        return Outcome(job.id, changed, f"{status.value}: urgent, written ahead of normal jobs")
    if status is JobStatus.FAILED:
        return Outcome(job.id, changed, "failed: urgent once `raybatch retry` takes it up again")
    return Outcome(job.id, False, f"already {status.value}: nothing to do")


def _in_batch(state: JobsWithChunks, job_id: int, pull: bool) -> str:
    batches = sorted({c.batch_id for c in state.get_chunks(job_id) if c.batch_id})
    where = f"batch {', '.join(batches)}" if batches else "a batch"
    if pull:
        return f"stays in {where}: {NO_SINGLE_CANCEL}; written first once answered"
    return f"stays in {where} (its answer is on the way); written first once answered"


def jobs_named(state: JobsWithChunks, job_ids: Sequence[int], source: str | None) -> list[int]:
    """The ids given, or those of every job registered from ``source``."""
    if source is None:
        return list(job_ids)
    return [job.id for job in state.jobs_from_source(source_uri(source))]
