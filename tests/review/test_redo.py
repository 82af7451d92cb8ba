"""``raybatch redo`` without Ray: a job goes back with its chunks cleared; the new answer is written
as new versions (a ``redo`` in the ledger, the previous versions kept); ``--fresh`` skips the cache."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from review_support import answered_job, desk, write_job

from raybatch.claude.answer import ChunkAnswer, DocType
from raybatch.models import REDO_FRESH, ChunkStatus, JobStatus
from raybatch.objects import MemoryObjectStore
from raybatch.reuse import outstanding_of
from raybatch.review.api import DocRef, Reviewer
from raybatch.samples import write_samples
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
    chunks = state.get_chunks(job)
    assert state.redo_job(job, [0], fresh=True)
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
    assert state.get_job(job).error_class is None
    assert [v.version for v in state.document_versions(job, 0)] == [1, 2]
    assert state.list_corrections(job)[-1].kind == "redo"
    assert all(store.exists(v.record.pdf_key or "") for v in state.document_versions(job))


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
