"""``raybatch redo`` without Ray: a job goes back with its chunks cleared; the new answer is written
as new versions (a ``redo`` in the ledger, the previous versions kept); ``--fresh`` skips the cache."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from review_support import answered_job, desk, write_job

from raybatch.claude.answer import ChunkAnswer, DocType
from raybatch.cost import cost_usd, prices_for
from raybatch.ids import OutputKeys
from raybatch.models import REDO_FRESH, ChunkStatus, DocumentRecord, JobStatus, ProcessingMode, Usage
from raybatch.objects import MemoryObjectStore
from raybatch.report import status_summary
from raybatch.reuse import outstanding_of
from raybatch.review.api import DocRef, Reviewer
from raybatch.review.corrections import redo_plan, redo_region
from raybatch.samples import write_samples
from raybatch.settings import ClaudeSettings
from raybatch.state import SqlStateStore


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("corpus")
    return folder, write_samples(folder, bundles=1, seed=7)


@pytest.fixture
def state(tmp_path: Path) -> SqlStateStore:
    opened = SqlStateStore.from_url(f"sqlite:///{tmp_path / 'state.db'}")
    opened.migrate()
    return opened


def test_a_redo_keeps_the_old_versions_and_writes_the_new_answer(
    state: SqlStateStore, corpus: tuple[Path, dict[str, Any]]
) -> None:
    store = MemoryObjectStore()
    folder, truth = corpus
    job = answered_job(state, folder, truth["bundles"][0])
    write_job(state, store, job)
    desk(state, store).set(DocRef(job, 0), Reviewer("ann"), doc_type="letter")
    desk(state, store).accept(DocRef(job, 10), Reviewer("ann"))  # pages 35-35: outside the redo
    outside = state.list_documents(job)[10]
    chunks = state.get_chunks(job)
    assert state.redo_job(job, [0], fresh=True, pages=(1, 8))
    assert not state.redo_job(job, [0])  # only a completed job is redone
    redone = state.get_job(job)
    assert (redone.status, redone.error_class) == (JobStatus.PENDING, REDO_FRESH)
    assert [c.status for c in state.get_chunks(job)][:2] == [ChunkStatus.FAILED, ChunkStatus.SUCCEEDED]
    first = ChunkAnswer.model_validate_json(chunks[0].answer or "")
    changed = first.model_copy(
        update={
            "documents": [
                first.documents[0].model_copy(update={"type": DocType.RECEIPT}),
                *first.documents[1:],
            ]
        }
    )
    state.save_chunks(job, [replace(chunks[0], answer=changed.model_dump_json())])
    state.transition(job, [JobStatus.PENDING], JobStatus.ANSWERED)
    write_job(state, store, job)
    docs = state.list_documents(job)
    assert (docs[0].doc_type, docs[0].version) == ("receipt", 3)  # the model's new answer, over ann's
    assert state.get_job(job).error_class is None and state.list_documents(job)[10] == outside
    assert [v.version for v in state.document_versions(job, 0)] == [1, 2]
    assert state.list_corrections(job)[-1].kind == "redo"
    assert all(store.exists(v.record.pdf_key or "") for v in state.document_versions(job))


def test_a_redo_adds_its_cost_to_the_first_answers(
    state: SqlStateStore, corpus: tuple[Path, dict[str, Any]]
) -> None:
    """The manifest and ``status`` count what the first answers cost and what the redo's answer did."""
    store, prices = MemoryObjectStore(), prices_for(ClaudeSettings().claude_model)
    folder, truth = corpus
    job = answered_job(state, folder, truth["bundles"][0], usage=Usage(1000, 100))
    write_job(state, store, job)
    chunks = state.get_chunks(job)
    first = cost_usd({ProcessingMode.BATCH: Usage(1000 * len(chunks), 100 * len(chunks))}, prices)
    assert status_summary(state, prices, [job])["estimated_cost_usd"] == first
    assert state.redo_job(job, [0], fresh=True, pages=(1, 8))
    redone = replace(chunks[0], input_tokens=600, output_tokens=50, sent_mode=ProcessingMode.SYNC)
    state.save_chunks(job, [redone])  # prepared, sent and answered again
    state.transition(job, [JobStatus.PENDING], JobStatus.ANSWERED)
    write_job(state, store, job)
    both = round(first + cost_usd({ProcessingMode.SYNC: Usage(600, 50)}, prices), 6)
    manifest = json.loads(store.get(OutputKeys(state.database_id()).manifest(job)))
    assert round(manifest["estimated_cost_usd"], 6) == both
    assert round(status_summary(state, prices, [job])["estimated_cost_usd"], 6) == both


def test_fresh_goes_past_the_answer_cache(state: SqlStateStore, corpus: tuple[Path, dict[str, Any]]) -> None:
    folder, truth = corpus
    job = answered_job(state, folder, truth["bundles"][0])
    write_job(state, MemoryObjectStore(), job)
    other = answered_job(state, folder, truth["bundles"][0], force=True)  # holds the same answers
    del other
    key_of = {c.n: c.processing_key for c in state.get_chunks(job)}
    for fresh, asked in ((False, []), (True, [0])):
        state.transition(job, [JobStatus.COMPLETED, JobStatus.PENDING], JobStatus.COMPLETED)
        state.redo_job(job, [0], fresh=fresh)
        plans = outstanding_of(state, [(state.get_job(job), True)], lambda j, n: key_of[n])[job]
        assert [p.n for p in plans] == asked


def test_a_redo_replaces_the_documents_over_its_pages_widened_to_common_boundaries() -> None:
    def doc(index: int, first: int, last: int, kind: str = "act", version: int = 1) -> DocumentRecord:
        return DocumentRecord(
            job_id=1, index=index, first_page=first, last_page=last, doc_type=kind, version=version
        )

    current = [doc(0, 1, 3), doc(1, 4, 9, version=2), doc(2, 10, 12)]
    answered = [doc(0, 1, 2, "invoice"), doc(1, 3, 5, "invoice"), doc(2, 6, 12, "invoice")]
    plan = redo_plan(current, answered, (1, 3), {1: 2, 2: 1})
    # pages 1-3 touch answered 3-5, which touches current 4-9, which touches answered 6-12: all of it
    assert [(d.index, d.first_page, d.version, d.doc_type) for d in plan.drafts] == [
        (0, 1, 2, "invoice"),
        (1, 3, 3, "invoice"),
        (2, 6, 2, "invoice"),
    ]
    kept = redo_plan(current, [doc(0, 1, 1), doc(1, 2, 3), doc(2, 4, 9), doc(3, 10, 12)], (1, 3), {1: 2})
    assert [(d.index, d.first_page) for d in kept.drafts] == [(0, 1), (1, 2), (2, 4), (3, 10)]
    assert (kept.drafts[2].version, kept.drafts[2].doc_type) == (2, "act")  # current 4-9, moved to index 2
    assert redo_region("pages 1-8") == (1, 8) and redo_region(None) is None
