"""Canceling jobs: the row first (which fences every holder of the job), then what was written.

A cancel moves a live job to ``canceled`` in one conditional UPDATE. That ends any lease on it, so
the driver stops preparing it, its writer's next check or write is refused, and the coordinator
cancels its batch at the API once no live job remains in it (the others' answers are filed as
usual). What the job had already written — objects under ``jobs/<id>/``, its document rows — is
removed here, and again by a writer that finds itself fenced; its rows in the documents table go
at the table's next compaction, which drops the rows of canceled jobs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from raybatch.ids import OutputKeys
from raybatch.models import TERMINAL_JOB_STATUSES, BatchStatus, JobRecord, JobStatus

if TYPE_CHECKING:  # the coordinator imports this module: it needs no store client
    from raybatch.objects.port import ObjectStore
    from raybatch.state.port import BatchStates, Catalog, Flags, JobStates

    class Outputs(Catalog, Flags, Protocol):
        """The slices of the state store that removing a job's outputs uses."""

    class CancelState(JobStates, Catalog, Flags, Protocol):
        """The slices of the state store that canceling jobs uses."""

    class BatchesWithJobs(BatchStates, JobStates, Protocol):
        """The slices of the state store that finding unneeded batches uses."""


LIVE_STATUSES = [s for s in JobStatus if s not in TERMINAL_JOB_STATUSES]


def cancel_jobs(state: CancelState, store: ObjectStore, job_ids: Iterable[int]) -> list[int]:
    """Cancel the live jobs among ``job_ids`` and remove their outputs; the ids canceled."""
    canceled = [job_id for job_id in job_ids if state.transition(job_id, LIVE_STATUSES, JobStatus.CANCELED)]
    for job_id in canceled:
        remove_outputs(state, store, job_id)
    return canceled


def remove_outputs(state: Outputs, store: ObjectStore, job_id: int) -> int:
    """Delete a job's objects and document rows; how many objects went."""
    keys = OutputKeys(state.database_id())
    doomed = list(store.list(f"{keys.job_prefix(job_id)}/"))
    removed = 0
    for key in doomed:
        if store.exists(key):
            store.delete(key)
            removed += 1
    state.delete_documents(job_id)
    return removed


def no_live_job(jobs: Sequence[JobRecord]) -> bool:
    """Whether a batch holding these jobs is needed by none of them (all canceled or ended)."""
    return bool(jobs) and all(job.status.terminal for job in jobs)


def unneeded_batches(state: BatchesWithJobs) -> list[str]:
    """The API ids of batches in progress that no live job needs any more."""
    return [
        record.anthropic_id
        for record in state.active_batches()
        if record.anthropic_id is not None
        and record.status is BatchStatus.IN_PROGRESS
        and no_live_job(state.get_jobs(state.batch_jobs(record.id)))
    ]


def live_jobs_of(jobs: Sequence[JobRecord], source: str) -> list[int]:
    """The live jobs whose source is ``source`` or lies under it (a folder or a prefix)."""
    prefix = source.rstrip("/") + "/"
    under = [j for j in jobs if j.source_uri == source or j.source_uri.startswith(prefix)]
    return [j.id for j in under if not j.status.terminal]
