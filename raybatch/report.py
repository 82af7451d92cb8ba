"""Reports read from the state store: status counts, documents by source file, evaluation, failures.

Shared by the CLI, the job entrypoint and notebooks, so each shows the same figures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from raybatch.cost import ModelPrices, add_usage, cost_usd
from raybatch.evaluate import evaluate
from raybatch.models import DocumentRecord, JobRecord, JobStatus, Priority
from raybatch.spend import spend_status
from raybatch.state.port import Catalog, JobStates, JobsWithChunks, StateStore

EVAL_KEYS = (
    "boundary_f1",
    "boundary_precision",
    "boundary_recall",
    "type_accuracy",
    "documents_expected",
    "documents_found",
    "over_splits",
    "under_splits",
)


def status_summary(
    state: StateStore, prices: ModelPrices, job_ids: Iterable[int] | None = None
) -> dict[str, Any]:
    """Jobs by status (all, urgent, normal), documents, batches in flight, tokens and cost (each
    request at the price of the mode it was sent with), who answered the requests, the pause flag
    and the spend cap.

    Counted by aggregate queries: no job, chunk or document row is loaded, however many there are.
    """
    wanted = None if job_ids is None else sorted(set(job_ids))
    totals = state.job_totals(wanted)
    requests = state.request_totals(wanted)
    usage = add_usage(requests.usage_by_mode.values())
    return {
        "jobs": totals.jobs,
        "by_status": {s.value: totals.by_status.get(s, 0) for s in JobStatus},
        "by_priority": {
            p.value: {s.value: totals.by_priority.get(p, {}).get(s, 0) for s in JobStatus} for p in Priority
        },
        "pages": totals.pages,
        "documents": totals.documents,
        "active_batches": len(state.active_batches()),
        "paused": state.is_paused(),
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "estimated_cost_usd": cost_usd(requests.usage_by_mode, prices),
        "requests": requests.requests,
        "requests_reused": requests.reused,
        "requests_emulated": requests.emulated,
        "spend": spend_status(state, prices),
        "canceled": canceled_spend(state, prices, wanted),
        "review": {s: n for s, n in state.review_totals(wanted).items() if s != "none"},
    }


def canceled_spend(
    state: JobsWithChunks, prices: ModelPrices, job_ids: Sequence[int] | None
) -> dict[str, Any]:
    """The canceled jobs (of ``job_ids``, or all) and what their requests cost before the cancel."""
    canceled = [j.id for j in state.list_jobs([JobStatus.CANCELED])]
    if job_ids is not None:
        canceled = sorted(set(canceled) & set(job_ids))
    usage = state.request_totals(canceled).usage_by_mode if canceled else {}
    return {"jobs": len(canceled), "job_ids": canceled[:100], "estimated_cost_usd": cost_usd(usage, prices)}


class JobsWithDocuments(JobStates, Catalog, Protocol):
    """The slices of the state store that reading documents by source file uses."""


def documents_by_file(
    state: JobsWithDocuments, jobs: Iterable[JobRecord] | None = None
) -> dict[str, list[DocumentRecord]]:
    """Each source file's documents (by the name the file had), newest job per name."""
    chosen = list(jobs) if jobs is not None else state.list_jobs()
    by_name: dict[str, JobRecord] = {}
    for job in sorted(chosen, key=lambda j: j.id):
        by_name[job.source_name] = job
    return {name: state.list_documents(job.id) for name, job in sorted(by_name.items())}


def evaluate_run(state: JobsWithDocuments, truth: Mapping[str, Any]) -> dict[str, Any]:
    """Split accuracy of what the store holds against a sample corpus's truth."""
    files = {b["file"] for b in truth["bundles"]}
    jobs = [j for j in state.list_jobs() if j.source_name in files]
    return evaluate(truth, documents_by_file(state, jobs))


def failures(jobs: Iterable[JobRecord]) -> list[tuple[int, str, str]]:
    """(job id, file name, reason) of every failed job."""
    return [
        (j.id, j.source_name, f"{j.error_class or 'Error'}: {j.error_message or 'failed'}")
        for j in jobs
        if j.status is JobStatus.FAILED
    ]
