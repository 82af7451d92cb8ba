"""Documents, groups, the OCR cache, the errors log and the pause flag."""

from __future__ import annotations

from dataclasses import replace

import pytest
from state_helpers import register, sha
from statements import statements

from raybatch.models import CachedPage, DocumentRecord, JobStatus, PageText
from raybatch.state import SqlStateStore


def document(job_id: int, index: int, **fields) -> DocumentRecord:  # type: ignore[no-untyped-def]
    return DocumentRecord(
        job_id=job_id,
        index=index,
        first_page=index * 2 + 1,
        last_page=index * 2 + 2,
        doc_type="invoice",
        fields={"inn": "7701234567", **fields},
        group_key="romashka/42",
        pdf_key=f"jobs/{job_id}/documents/{index}.pdf",
        extra={"pages": [1, 2]},
        values={"counterparty": "ООО «Ромашка»", "amount": 1234.5},
    )


def test_documents_are_exactly_the_last_upserted_set(store: SqlStateStore) -> None:
    job = register(store, 1)[0].id
    other = register(store, 2)[0].id
    store.upsert_documents(other, [document(other, 0)])

    store.upsert_documents(job, [document(job, i) for i in range(3)])
    store.upsert_documents(job, [document(job, i) for i in range(3)])  # a rerun
    assert store.list_documents(job) == [document(job, i) for i in range(3)]

    store.upsert_documents(job, [document(job, 0, note="updated"), document(job, 1)])
    assert store.list_documents(job) == [document(job, 0, note="updated"), document(job, 1)]
    store.upsert_documents(job, [])
    assert store.list_documents(job) == []
    assert store.list_documents() == [document(other, 0)]
    with pytest.raises(ValueError):
        store.upsert_documents(job, [document(other, 0)])


def test_groups_upsert(store: SqlStateStore) -> None:
    store.upsert_group("romashka/42", "Ромашка, договор 42")
    store.upsert_group("romashka/42", "Romashka, contract 42")
    store.upsert_group("acme/7", "ACME 7")
    assert store.list_groups() == {"acme/7": "ACME 7", "romashka/42": "Romashka, contract 42"}
    store.upsert_groups({"acme/7": "ACME, 7", "zeta/1": "Zeta 1"})
    store.upsert_groups({})
    assert store.list_groups() == {
        "acme/7": "ACME, 7",
        "romashka/42": "Romashka, contract 42",
        "zeta/1": "Zeta 1",
    }


def test_documents_of_several_jobs_are_upserted_together_but_not_those_of_a_canceled_job(
    store: SqlStateStore,
) -> None:
    (a, _), (b, _), (c, _) = (register(store, n) for n in (1, 2, 3))
    store.upsert_documents(a.id, [document(a.id, 0), document(a.id, 1)])
    assert store.transition(c.id, [JobStatus.PENDING], JobStatus.CANCELED)
    wanted = {
        a.id: [replace(document(a.id, 0), doc_type="act")],
        b.id: [document(b.id, 0)],
        c.id: [document(c.id, 0)],
    }
    assert store.upsert_documents_of(wanted) == {c.id}
    assert [(d.job_id, d.index, d.doc_type) for d in store.list_documents()] == [
        (a.id, 0, "act"),
        (b.id, 0, "invoice"),
    ]
    assert store.upsert_documents_of({a.id: [], b.id: [document(b.id, 1)]}) == set()
    assert [(d.job_id, d.index) for d in store.list_documents()] == [(b.id, 1)], (
        "each job's rows exactly these"
    )
    with pytest.raises(ValueError):
        store.upsert_documents_of({a.id: [document(b.id, 0)]})


def test_page_text_cache_round_trip(store: SqlStateStore) -> None:
    text = PageText(
        page=3, text="Счёт № 42\nInvoice", origin="ocr:rapidocr-3.4", confidence=0.93, rotation=90
    )
    assert store.get_page_text(sha(1), 3, "rapidocr-3.4") is None
    store.put_page_text(sha(1), "rapidocr-3.4", text)

    assert store.get_page_text(sha(1), 3, "rapidocr-3.4") == text
    assert store.get_page_text(sha(1), 3, "vision-v1") is None
    assert store.get_page_text(sha(1), 4, "rapidocr-3.4") is None
    assert store.get_page_text(sha(2), 3, "rapidocr-3.4") is None

    better = PageText(page=3, text="Счёт № 42", origin="ocr:rapidocr-3.4", confidence=0.99)
    store.put_page_text(sha(1), "rapidocr-3.4", better)
    assert store.get_page_text(sha(1), 3, "rapidocr-3.4") == better
    store.put_page_text(sha(1), "vision-v1", replace(better, page=5))
    found = store.cached_page_texts_of([sha(1), sha(2)])
    assert sorted((c.engine, c.text.page) for c in found[sha(1)]) == [("rapidocr-3.4", 3), ("vision-v1", 5)]
    assert found[sha(2)] == []


def test_many_page_texts_are_cached_in_one_statement_and_the_last_of_a_page_wins(
    store: SqlStateStore,
) -> None:
    read = PageText(page=1, text="Invoice 7", origin="ocr:vision-v1", confidence=0.9)
    blank = PageText(page=2, text="", origin="ocr:vision-v1", confidence=0.0)
    store.put_page_text(sha(2), "vision-v1", replace(read, text="stale"))
    reads = [
        (sha(1), CachedPage("vision-v1", read)),
        (sha(1), CachedPage("vision-v1", blank)),
        (sha(2), CachedPage("vision-v1", replace(read, text="first"))),
        (sha(2), CachedPage("vision-v1", read)),  # the same page twice in one put: the last wins
        (sha(2), CachedPage("rapidocr-3.4", replace(read, origin="ocr:rapidocr-3.4", confidence=0.9))),
    ]
    with statements(store) as sent:
        store.put_page_texts(reads)
    assert [one.split()[0] for one in sent if not one.startswith("BEGIN")] == ["INSERT"]  # SQLite: BEGIN too
    found = store.cached_page_texts_of([sha(1), sha(2)])
    assert sorted(((c.engine, c.text) for c in found[sha(1)]), key=lambda one: one[1].page) == [
        ("vision-v1", read),
        ("vision-v1", blank),
    ]
    assert {c.engine: c.text.text for c in found[sha(2)]} == {
        "vision-v1": "Invoice 7",
        "rapidocr-3.4": "Invoice 7",
    }
    with statements(store) as sent:
        store.put_page_texts([])
    assert sent == []


def test_errors_log(store: SqlStateStore) -> None:
    job = register(store, 1)[0].id
    store.record_error(job, "submit", "RateLimited", "429 from the API")
    store.record_error(None, "poll", "UpstreamUnavailable", "502")

    assert [(e.job_id, e.phase, e.error_class) for e in store.list_errors()] == [
        (job, "submit", "RateLimited"),
        (None, "poll", "UpstreamUnavailable"),
    ]
    [mine] = store.list_errors(job)
    assert mine.message == "429 from the API" and mine.created_at is not None


def test_pause_flag_is_shared_through_the_database(store: SqlStateStore, db_url: str) -> None:
    other = SqlStateStore.from_url(db_url)  # another process's view
    assert not store.is_paused()
    store.set_paused(True)
    assert other.is_paused()
    other.set_paused(False)
    assert not store.is_paused()
    other.close()


def test_group_spellings_are_distinct_per_group(store: SqlStateStore) -> None:
    from state_helpers import register

    from raybatch.models import DocumentRecord

    job = register(store, 31)[0].id
    docs = [
        DocumentRecord(
            job, 0, 1, 1, "invoice", group_key="g_1", values={"counterparty": "Acme", "reference": "D-1"}
        ),
        DocumentRecord(
            job, 1, 2, 2, "act", group_key="g_1", values={"counterparty": "Acme", "reference": "D-1"}
        ),
        DocumentRecord(
            job, 2, 3, 3, "letter", group_key=None, values={"counterparty": "Acme", "reference": None}
        ),
    ]
    store.upsert_documents(job, docs)
    assert store.group_spellings() == [("g_1", ("Acme", "D-1"))]
