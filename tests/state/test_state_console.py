"""The console's reads on both backends: keyset pages of jobs and documents, groups, users."""

from __future__ import annotations

from raybatch.models import ConsoleRole, DocumentRecord, JobStatus, SourceKind
from raybatch.state import SqlStateStore
from raybatch.state.port import DocumentQuery


def _jobs(store: SqlStateStore, names: list[str]) -> list[int]:
    return [
        store.register_job(
            sha256=f"{i:064x}", source_uri=f"file:///{n}", source_name=n, kind=SourceKind.PDF, size_bytes=1
        )[0].id
        for i, n in enumerate(names)
    ]


def test_jobs_page_newest_first_below_the_keyset(store: SqlStateStore) -> None:
    ids = _jobs(store, [f"file_{n}.pdf" for n in range(7)])
    store.fail_job(ids[2], "prepare", "InvalidSource", "no")
    first = store.page_jobs(limit=3)
    assert [j.id for j in first] == ids[::-1][:3]
    assert [j.id for j in store.page_jobs(before=first[-1].id, limit=3)] == ids[::-1][3:6]
    assert [j.id for j in store.page_jobs([JobStatus.FAILED])] == [ids[2]]
    assert [j.source_name for j in store.page_jobs(search="E_5")] == ["file_5.pdf"]
    assert store.page_jobs(search="%") == []  # wildcards are literal


def test_documents_page_by_query_and_keyset(store: SqlStateStore) -> None:
    (job,) = _jobs(store, ["a.pdf"])
    docs = [
        DocumentRecord(
            job_id=job,
            index=i,
            first_page=i + 1,
            last_page=i + 1,
            doc_type=t,
            values={"counterparty": p, "date": d},
        )
        for i, (t, p, d) in enumerate(
            [("invoice", "Acme", "2026-01-02"), ("act", "Globex", "2026-02-03"), ("invoice", "Ромашка", None)]
        )
    ]
    store.upsert_documents(job, docs)
    everything = store.page_documents(DocumentQuery(), limit=2)
    assert [f.document.index for f in everything] == [2, 1]
    assert [
        f.document.index for f in store.page_documents(DocumentQuery(), before=everything[-1].row_id)
    ] == [0]
    assert [
        f.document.index for f in store.page_documents(DocumentQuery(doc_type="invoice", text="acm"))
    ] == [0]
    assert [f.document.index for f in store.page_documents(DocumentQuery(date_from="2026-02"))] == [1]
    assert [f.document.index for f in store.page_documents(DocumentQuery(text="Ромашка"))] == [2]  # not ASCII
    assert store.document_classes() == ["act", "invoice"]
    assert store.get_document(job, 1).counterparty == "Globex"


def test_groups_with_their_counts_and_progress(store: SqlStateStore) -> None:
    (job,) = _jobs(store, ["a.pdf"])
    store.upsert_group("acme/1", "Acme · 1")
    store.upsert_group("zeta/2", "Zeta · 2")
    store.upsert_documents(
        job,
        [DocumentRecord(job_id=job, index=0, first_page=1, last_page=1, doc_type="x", group_key="acme/1")],
    )
    assert [(g.key, g.documents) for g in store.page_groups()] == [("acme/1", 1), ("zeta/2", 0)]
    assert [g.key for g in store.page_groups(search="zet")] == ["zeta/2"]
    store.set_progress({job: 0.25})
    assert [(p.id, p.progress) for p in store.job_progress([job, 999])] == [(job, 0.25)]


def test_console_users_keep_a_hash_and_a_role(store: SqlStateStore) -> None:
    store.put_console_user("ana", ConsoleRole.READER, "$argon2id$x")
    store.put_console_user("ana", ConsoleRole.REVIEWER, "$argon2id$y")
    assert store.get_console_user("ana") == store.list_console_users()[0]
    assert store.get_console_user("ana").role is ConsoleRole.REVIEWER  # type: ignore[union-attr]
    assert store.get_console_user("bob") is None
