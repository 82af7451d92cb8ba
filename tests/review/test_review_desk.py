"""Corrections through the desk: new versions written by the writer's steps, old ones kept, the
same correction twice a no-op, a stale one a conflict, and reruns that keep every correction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pymupdf
import pytest
from review_support import answered_job, desk, write_job

from raybatch.classes import classes_digest, default_classes
from raybatch.errors import ConfigError, ReviewConflict
from raybatch.ids import OutputKeys
from raybatch.models import JobStatus
from raybatch.objects import MemoryObjectStore
from raybatch.review.api import DocRef, Reviewer
from raybatch.samples import write_samples
from raybatch.state import SqlStateStore
from raybatch.steps.table_files import read_documents_table

ANN, BOB = Reviewer("ann"), Reviewer("bob")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("corpus")
    return folder, write_samples(folder, bundles=1, seed=7)


@pytest.fixture
def written(
    tmp_path: Path, corpus: tuple[Path, dict[str, Any]]
) -> tuple[SqlStateStore, MemoryObjectStore, int]:
    state = SqlStateStore.from_url(f"sqlite:///{tmp_path / 'state.db'}")
    state.migrate()
    store = MemoryObjectStore()
    folder, truth = corpus
    job = answered_job(state, folder, truth["bundles"][0])
    write_job(state, store, job, review_below=1.0)  # every document waits
    return state, store, job


def pages_of(store: MemoryObjectStore, key: str | None) -> int:
    assert key is not None
    with pymupdf.open(stream=store.get(key), filetype="pdf") as pdf:
        return int(pdf.page_count)


def test_the_writer_marks_documents_below_the_threshold(
    written: tuple[SqlStateStore, MemoryObjectStore, int],
) -> None:
    state, store, job = written
    docs = state.list_documents(job)
    assert docs and all(d.review == "pending" and d.confidence is not None for d in docs)
    assert state.get_job(job).status is JobStatus.COMPLETED
    assert [d.index for d in desk(state, store).pending(doc_type="contract").documents] == [2, 3, 7]


def test_the_queue_is_paged_by_a_cursor(written: tuple[SqlStateStore, MemoryObjectStore, int]) -> None:
    state, store, job = written
    review, count = desk(state, store), len(state.list_documents(job))
    first = review.pending(limit=4)
    assert [d.index for d in first.documents] == [0, 1, 2, 3]
    assert (first.more, first.next) == (count - 4, DocRef(job, 3))
    walked, page = [], first
    while True:
        walked += [d.index for d in page.documents]
        if page.next is None:
            break
        page = review.pending(after=page.next, limit=4)
    assert walked == list(range(count)) and page.more == 0
    assert review.pending(after=DocRef(job, count - 1)).documents == []
    assert review.pending(doc_type="contract", limit=3).next is None, "three contracts: no next page"
    assert review.next_pending(DocRef(job, 3)) == state.list_documents(job)[4]
    assert review.previous_pending(DocRef(job, 3)) == state.list_documents(job)[2]
    assert review.previous_pending(DocRef(job, 0)) is None
    with pytest.raises(ConfigError):
        review.pending(limit=0)


def test_split_then_merge_writes_new_versions_and_keeps_the_old(
    written: tuple[SqlStateStore, MemoryObjectStore, int],
) -> None:
    state, store, job = written
    review = desk(state, store)
    split = review.split(DocRef(job, 2), 10, ANN)  # the contract of pages 3-17
    assert split.applied and [(d.index, d.version) for d in split.documents][:3] == [(2, 2), (3, 2), (4, 2)]
    now = state.list_documents(job)
    assert len(now) == 16 and (now[2].first_page, now[2].last_page, now[3].first_page) == (3, 9, 10)
    assert pages_of(store, now[2].pdf_key) == 7 and pages_of(store, now[3].pdf_key) == 8
    assert now[2].pdf_key == f"{OutputKeys(state.database_id()).job_prefix(job)}/documents/2.v2.pdf"
    [old] = state.document_versions(job, 2)
    assert (old.version, old.record.last_page) == (1, 17) and pages_of(store, old.record.pdf_key) == 15
    merged = review.merge(DocRef(job, 2), ANN)
    assert (merged.documents[0].index, merged.documents[0].version) == (2, 3)
    now = state.list_documents(job)
    assert (
        len(now) == 15 and (now[2].first_page, now[2].last_page) == (3, 17) and now[2].review == "corrected"
    )
    assert pages_of(store, now[2].pdf_key) == 15
    assert [v.version for v in state.document_versions(job, 2)] == [1, 2]
    assert all(store.exists(v.record.pdf_key or "") for v in state.document_versions(job))


def test_set_accept_move_and_what_the_outputs_say(
    written: tuple[SqlStateStore, MemoryObjectStore, int],
) -> None:
    state, store, job = written
    review = desk(state, store)
    review.set(DocRef(job, 0), ANN, doc_type="letter", fields={"amount": "99.5", "vat": "19"})
    review.accept(DocRef(job, 1), BOB)
    review.move(DocRef(job, 4), 21, ANN)  # the invoice of pages 24-25 starts at 21: 18-20 and 21-25
    docs = state.list_documents(job)
    assert (docs[0].doc_type, docs[0].amount, docs[0].fields["vat"], docs[0].version) == (
        "letter",
        99.5,
        "19",
        2,
    )
    assert docs[1].review == "accepted" and [(d.first_page, d.last_page) for d in docs[3:5]] == [
        (18, 20),
        (21, 25),
    ]
    keys = OutputKeys(state.database_id())
    manifest = json.loads(store.get(keys.manifest(job)))
    first = manifest["documents"][0]
    assert (first["doc_type"], first["version"], first["review"], first["confidence"]) == (
        "letter",
        2,
        "corrected",
        1.0,
    )
    files = [store.get(key) for key in store.list(f"{keys.documents_table}/")]
    table = [row for row in read_documents_table(files).to_pylist() if row["job_id"] == job]
    assert [(r["index"], r["version"], r["review"]) for r in table[:2]] == [
        (0, 2, "corrected"),
        (1, 2, "accepted"),
    ]
    assert len(files) == 4  # the write, then a file appended by each correction's publish
    assert len(table) == len(docs)  # the newest write's rows only: the superseded ones are not read
    assert {r["classes_sha256"] for r in table} == {classes_digest(default_classes())}
    assert all(r["text"] == store.get(r["text_key"]).decode() for r in table if r["text_key"])
    assert [c.reviewer for c in state.list_corrections(job)] == ["ann", "bob", "ann"]


def test_the_same_correction_twice_changes_nothing(
    written: tuple[SqlStateStore, MemoryObjectStore, int],
) -> None:
    state, store, job = written
    review = desk(state, store)
    first = review.set(DocRef(job, 0), ANN, doc_type="letter")
    again = review.set(DocRef(job, 0), ANN, doc_type="letter", expected_version=1)
    assert first.applied and not again.applied and again.correction == first.correction
    assert len(state.list_corrections(job)) == 1 and state.list_documents(job)[0].version == 2


def test_a_second_reviewer_from_an_old_version_gets_a_conflict(
    written: tuple[SqlStateStore, MemoryObjectStore, int],
) -> None:
    state, store, job = written
    review = desk(state, store)
    review.set(DocRef(job, 0), ANN, doc_type="letter", expected_version=1)
    before = (state.list_documents(job), state.list_corrections(job), sorted(store.list("")))
    with pytest.raises(ReviewConflict, match="version 2, not 1"):
        review.set(DocRef(job, 0), BOB, doc_type="receipt", expected_version=1)
    assert (state.list_documents(job), state.list_corrections(job), sorted(store.list(""))) == before


def test_bad_corrections_say_why(written: tuple[SqlStateStore, MemoryObjectStore, int]) -> None:
    state, store, job = written
    review = desk(state, store)
    with pytest.raises(ConfigError, match="pages 1-1"):
        review.split(DocRef(job, 0), 1, ANN)
    with pytest.raises(ConfigError, match="no next one"):
        review.merge(DocRef(job, 14), ANN)
    with pytest.raises(ConfigError, match="unknown class"):
        review.set(DocRef(job, 0), ANN, doc_type="poem")
    with pytest.raises(ConfigError, match="JOB:INDEX"):
        DocRef.parse("12")
    assert state.list_corrections() == []


def test_a_rerun_and_a_forced_job_keep_every_correction(
    written: tuple[SqlStateStore, MemoryObjectStore, int], corpus: tuple[Path, dict[str, Any]]
) -> None:
    state, store, job = written
    review = desk(state, store)
    review.split(DocRef(job, 2), 10, ANN)
    review.set(DocRef(job, 0), ANN, doc_type="letter")
    reviewed = state.list_documents(job)
    state.transition(job, [JobStatus.COMPLETED], JobStatus.ANSWERED)  # written again, as a rerun would
    write_job(state, store, job)
    assert state.list_documents(job) == reviewed
    folder, truth = corpus
    forced = answered_job(state, folder, truth["bundles"][0], force=True)
    write_job(state, store, forced)
    again = state.list_documents(forced)
    assert [(d.first_page, d.last_page, d.doc_type, d.review) for d in again] == [
        (d.first_page, d.last_page, d.doc_type, d.review) for d in reviewed
    ]
    assert again[0].extra["carried_from"] == f"{job}:0 v2" and pages_of(store, again[3].pdf_key) == 8
