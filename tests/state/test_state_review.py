"""The corrections ledger: versions kept, idempotency keys, conflicts, review queues, reviewed layouts."""

from __future__ import annotations

from dataclasses import replace

import pytest
import sqlalchemy as sa
from state_helpers import register, sha
from statements import statements

from raybatch.errors import ReviewConflict
from raybatch.models import Correction, DocumentRecord, JobStatus, ReviewState
from raybatch.state import SqlStateStore


def document(job_id: int, index: int, **more) -> DocumentRecord:  # type: ignore[no-untyped-def]
    values = {
        "job_id": job_id,
        "index": index,
        "first_page": index * 2 + 1,
        "last_page": index * 2 + 2,
        "doc_type": "invoice",
        "values": {"amount": 10.0 + index},
        "pdf_key": f"jobs/{job_id}/documents/{index}.pdf",
        "confidence": 0.5,
        "review": ReviewState.PENDING.value,
        "review_reasons": ["model: 0.50"],
        "field_confidence": {"amount": 0.5},
    }
    return DocumentRecord(**{**values, **more})


def correction(job_id: int, index: int, base: int, key: str, reviewer: str = "ann") -> Correction:
    change = {"doc_type": "act"}
    return Correction(job_id, index, base, "set", reviewer, change, key)


def test_documents_keep_their_review_columns(store: SqlStateStore) -> None:
    job = register(store, 1)[0].id
    store.upsert_documents(job, [document(job, 0), document(job, 1, review="none", confidence=0.99)])
    first, second = store.list_documents(job)
    assert (first.version, first.review, first.review_reasons) == (1, "pending", ["model: 0.50"])
    assert first.field_confidence == {"amount": 0.5} and second.confidence == 0.99
    assert [d.index for d in store.documents_in_review(["pending"])] == [0]


def test_a_correction_keeps_the_previous_version_and_its_keys(store: SqlStateStore) -> None:
    job = register(store, 1)[0].id
    store.upsert_documents(job, [document(job, 0), document(job, 1)])
    new = document(job, 0, version=2, doc_type="act", review="corrected", pdf_key="k/0.v2.pdf")
    record, applied = store.record_correction(correction(job, 0, 1, "c1"), {0: 1}, [new])
    assert applied and record.written == ((0, 2),) and record.reviewer == "ann"
    assert store.list_documents(job)[0] == new
    [old] = store.document_versions(job)
    assert (old.version, old.record.doc_type, old.record.pdf_key) == (
        1,
        "invoice",
        f"jobs/{job}/documents/0.pdf",
    )
    assert old.replaced_by == record.id
    assert store.highest_versions(job) == {0: 2, 1: 1}
    assert store.list_corrections(job) == [record] and store.get_correction("c1") == record


def test_the_same_correction_twice_changes_nothing(store: SqlStateStore) -> None:
    job = register(store, 1)[0].id
    store.upsert_documents(job, [document(job, 0)])
    new = document(job, 0, version=2, review="corrected")
    first, applied = store.record_correction(correction(job, 0, 1, "c1"), {0: 1}, [new])
    again, applied_again = store.record_correction(correction(job, 0, 1, "c1"), {0: 1}, [new])
    assert applied and not applied_again and again == first
    assert len(store.document_versions(job)) == 1 and len(store.list_corrections()) == 1


def test_a_correction_from_an_old_version_is_a_conflict_and_loses_nothing(store: SqlStateStore) -> None:
    job = register(store, 1)[0].id
    store.upsert_documents(job, [document(job, 0)])
    ann = document(job, 0, version=2, doc_type="act", review="corrected")
    store.record_correction(correction(job, 0, 1, "ann-1"), {0: 1}, [ann])
    bob = document(job, 0, version=2, doc_type="letter", review="corrected")
    with pytest.raises(ReviewConflict, match="version 2, not 1"):
        store.record_correction(correction(job, 0, 1, "bob-1", "bob"), {0: 1}, [bob])
    assert store.list_documents(job) == [ann]
    assert [c.key for c in store.list_corrections()] == ["ann-1"]
    assert len(store.document_versions(job)) == 1


def test_a_split_adds_an_index_and_a_merge_removes_one(store: SqlStateStore) -> None:
    job = register(store, 1)[0].id
    store.upsert_documents(job, [document(job, 0), document(job, 1)])
    halves = [
        document(job, 0, version=2, last_page=1),
        document(job, 1, version=2, first_page=2, last_page=2),
        document(job, 2, first_page=3, last_page=4),
    ]
    store.record_correction(correction(job, 0, 1, "split"), {0: 1, 1: 1, 2: None}, halves)
    assert [(d.index, d.first_page, d.last_page) for d in store.list_documents(job)] == [
        (0, 1, 1),
        (1, 2, 2),
        (2, 3, 4),
    ]
    merged = [document(job, 1, version=3, first_page=2, last_page=4)]
    record, _ = store.record_correction(correction(job, 1, 2, "merge"), {1: 2, 2: 1}, merged, removed=[2])
    assert record.removed == (2,)
    assert [(d.index, d.version) for d in store.list_documents(job)] == [(0, 2), (1, 3)]
    assert [(v.index, v.version) for v in store.document_versions(job)] == [(0, 1), (1, 1), (1, 2), (2, 1)]
    assert store.highest_versions(job) == {0: 2, 1: 3, 2: 1}
    assert store.versions_of([job, job + 1]) == {job: store.document_versions(job), job + 1: []}


def test_the_reviewed_layout_is_the_newest_reviewed_job_of_a_source(store: SqlStateStore) -> None:
    job = register(store, 1)[0].id
    forced = register(store, 1, force=True)[0].id
    assert store.reviewed_layout(sha(1)) == []
    store.upsert_documents(job, [document(job, 0, review="accepted"), document(job, 1)])
    store.upsert_documents(forced, [document(forced, 0)])
    assert [(d.job_id, d.index) for d in store.reviewed_layout(sha(1))] == [(job, 0), (job, 1)]
    store.upsert_documents(forced, [replace(document(forced, 0), review="corrected")])
    assert {d.job_id for d in store.reviewed_layout(sha(1))} == {forced}
    other = register(store, 2)[0].id
    store.upsert_documents(other, [document(other, 0, review="accepted")])
    layouts = store.reviewed_layouts([sha(1), sha(2), sha(3)])
    assert layouts == {
        sha(1): store.reviewed_layout(sha(1)),
        sha(2): store.reviewed_layout(sha(2)),
        sha(3): [],
    }


def test_rows_written_before_review_existed_read_as_version_one(store: SqlStateStore, db_url: str) -> None:
    job = register(store, 1)[0].id
    store.upsert_documents(job, [document(job, 0)])
    engine = sa.create_engine(db_url)
    with engine.begin() as conn:  # as 0006 wrote them: no reasons, no field confidences
        conn.execute(sa.text("UPDATE documents SET review_reasons = NULL, field_confidence = NULL"))
    engine.dispose()
    [doc] = store.list_documents(job)
    assert (doc.version, doc.review_reasons, doc.field_confidence) == (1, [], {})


def test_review_totals_count_documents_by_state(store: SqlStateStore) -> None:
    job = register(store, 1)[0].id
    other = register(store, 2)[0].id
    store.upsert_documents(job, [document(job, 0), document(job, 1, review="accepted")])
    store.upsert_documents(other, [document(other, 0)])
    assert store.review_totals() == {"none": 0, "pending": 2, "accepted": 1, "corrected": 0}
    assert store.review_totals([job])["pending"] == 1
    by_job = store.review_totals_by_job([job, other, 999])
    assert by_job == {
        job: {"none": 0, "pending": 1, "accepted": 1, "corrected": 0},
        other: {"none": 0, "pending": 1, "accepted": 0, "corrected": 0},
    }


def test_a_job_being_redone_is_the_one_its_source_registers_to(store: SqlStateStore) -> None:
    job = register(store, 1)[0].id
    forced = register(store, 1, force=True)[0].id
    for done in (job, forced):
        store.transition(done, [JobStatus.PENDING], JobStatus.COMPLETED)
    assert register(store, 1)[0].id == forced  # the newest, as always
    assert store.redo_job(job, [0], fresh=True, pages=(1, 8))
    again = register(store, 1)[0]
    assert (again.id, again.status, again.error_message) == (job, JobStatus.PENDING, "pages 1-8")


def test_the_review_queue_is_read_a_page_at_a_time(store: SqlStateStore) -> None:
    """Filters, order, the cursor and the limit are the query's (SQL LIMIT): pages walk the queue
    once, in (job, index) order, and what waits after a page is counted."""
    jobs = [register(store, n)[0].id for n in (1, 2)]
    reasons = [["model: 0.50"], ["ocr: lowest page 0.41", "required: amount"], ["border: 100%_x"]]
    for job in jobs:
        docs = [
            document(job, i, doc_type=("act", "invoice")[i % 2], review_reasons=reasons[i % 3])
            for i in range(5)
        ]
        store.upsert_documents(job, [*docs, document(job, 5, review="accepted")])
    pending = ["pending"]
    walked, after = [], None
    with statements(store) as sent:
        while page := store.documents_in_review(pending, after=after, limit=4):
            walked += [(d.job_id, d.index) for d in page]
            after = walked[-1]
    queries = [statement for statement in sent if statement.startswith("SELECT")]
    assert len(queries) == 4 and all("LIMIT" in query for query in queries)
    assert walked == [(job, i) for job in jobs for i in range(5)]
    assert store.count_in_review(pending) == 10 and store.count_in_review(pending, after=(jobs[0], 3)) == 6
    first, second = jobs
    assert [(d.job_id, d.index) for d in store.documents_in_review(pending, before=(second, 1), limit=2)] == [
        (second, 0),
        (first, 4),
    ]
    invoices = store.documents_in_review(pending, doc_type="invoice", after=(first, 1))
    assert [(d.job_id, d.index) for d in invoices] == [(first, 3), (second, 1), (second, 3)]
    required = store.documents_in_review(pending, reason="required", limit=1)
    assert [(d.job_id, d.index) for d in required] == [(first, 1)]
    assert (
        store.count_in_review(pending, reason="REQUIRED") == 4
        and store.count_in_review(pending, reason="req") == 0
    )
    assert store.count_in_review(pending, reason="100%") == 0, "a reason code is matched whole, % literal"
    assert store.count_in_review(pending, reason="border", doc_type="act") == 2
