"""Truth from review: the reviewed versions as a ``truth.json``, and the model's answers scored on it.

A job counts once someone corrected or accepted one of its documents: its current documents are
the truth (those nobody touched count as right as the model gave them), and the model's answers
are the versions the writer wrote — every version no correction wrote, current or kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from raybatch.evaluate import evaluate
from raybatch.models import DocumentRecord, JobRecord
from raybatch.state.port import StateStore


def reviewed_jobs(state: StateStore) -> list[JobRecord]:
    """The jobs with at least one correction, by id."""
    return state.get_jobs(sorted({c.job_id for c in state.list_corrections()}))


def model_documents(state: StateStore, job_id: int) -> list[DocumentRecord]:
    """What the model answered for a job: the versions the writer wrote, in index order."""
    written = {pair for c in state.list_corrections(job_id) for pair in c.written}
    every = [*state.list_documents(job_id), *(v.record for v in state.document_versions(job_id))]
    return sorted((d for d in every if (d.index, d.version) not in written), key=lambda d: d.index)


def truth_bundle(job: JobRecord, documents: Sequence[DocumentRecord], file: str) -> dict[str, Any]:
    """One job's documents as a bundle of ``truth.json``."""
    return {
        "file": file,
        "sha256": job.sha256,
        "pages": job.pages or 0,
        "documents": [
            {
                "index": doc.index,
                "first_page": doc.first_page,
                "last_page": doc.last_page,
                "type": doc.doc_type,
                "fields": dict(doc.values),
            }
            for doc in documents
        ],
    }


def reviewed_truth(state: StateStore) -> dict[str, Any]:
    """The reviewed jobs' current documents in the format ``eval --truth`` reads (by file name;
    the newest job of a name wins, as ``eval --truth`` takes it)."""
    by_name = {job.source_name: job for job in reviewed_jobs(state)}
    bundles = [truth_bundle(job, state.list_documents(job.id), name) for name, job in sorted(by_name.items())]
    return {"bundles": bundles}


def evaluate_reviewed(state: StateStore) -> dict[str, Any]:
    """The model's answers against the reviewed versions: boundaries, classes and fields."""
    jobs = reviewed_jobs(state)
    truth = {"bundles": [truth_bundle(job, state.list_documents(job.id), f"job-{job.id}") for job in jobs]}
    found = {f"job-{job.id}": model_documents(state, job.id) for job in jobs}
    return {
        **evaluate(truth, found),
        "jobs_reviewed": len(jobs),
        "corrections": len(state.list_corrections()),
    }
