"""The review queue on the real ledger, in-process: each POSTed action is a correction in the
ledger, made by the logged-in user, writing new versions; a stale version changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ledger_builders import LedgerData, build_ledger_data
from starlette.testclient import TestClient
from statements import statements


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[LedgerData]:
    built = build_ledger_data(tmp_path)
    yield built
    built.state.close()


@pytest.fixture
def client(ledger: LedgerData) -> Iterator[TestClient]:
    with TestClient(ledger.app(), base_url="http://127.0.0.1") as test_client:
        yield test_client


def _csrf(text: str) -> str:
    return text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]


def _post(client: TestClient, job: int, index: int, **form: str) -> str:
    token = _csrf(client.get(f"/review?job={job}&index={index}").text)
    answer = client.post(f"/review/{job}/{index}", data={**form, "csrf_token": token})
    assert answer.status_code == 200
    return answer.text


def test_the_queue_is_the_ledgers(ledger: LedgerData, client: TestClient) -> None:
    page = client.get("/review").text
    assert f"job {ledger.job}, document 0 <small>(15 waiting)</small>" in page and 'id="next"' in page
    assert client.get(f"/jobs/{ledger.job}/pages/1.png?size=l").status_code == 200
    assert "1.00 · pending" in client.get(f"/jobs/{ledger.job}").text
    assert '<td data-field="review">15 waiting</td>' in client.get("/jobs").text


def test_accept_and_set_write_versions_by_the_viewer(ledger: LedgerData, client: TestClient) -> None:
    job, state = ledger.job, ledger.state
    assert "accepted document 0" in _post(client, job, 0, action="accept", version="1")
    assert "document 1 is now receipt" in _post(
        client, job, 1, action="set_class", version="1", value="receipt"
    )
    assert "amount of document 4 set" in _post(
        client, job, 4, action="set_field", version="1", name="amount", value="12.5"
    )
    docs = state.list_documents(job)
    assert (docs[0].review, docs[0].version) == ("accepted", 2)
    assert (docs[1].doc_type, docs[1].review, docs[1].version) == ("receipt", "corrected", 2)
    assert (docs[4].amount, docs[4].version) == (12.5, 2)
    corrections = state.list_corrections(job)
    assert [c.kind for c in corrections] == ["accept", "set", "set"]
    assert all(c.reviewer.startswith("local:") for c in corrections)
    assert corrections[1].change == {"doc_type": "receipt"}
    assert [v.version for v in state.document_versions(job, 1)] == [1]
    assert '<td data-field="review">12 waiting · 3 reviewed</td>' in client.get("/jobs").text


def test_split_then_merge_through_the_console(ledger: LedgerData, client: TestClient) -> None:
    job, state, store = ledger.job, ledger.state, ledger.store
    assert "document 2 split before page 10" in _post(client, job, 2, action="split", version="1", page="10")
    docs = state.list_documents(job)
    assert len(docs) == 16 and [(d.first_page, d.last_page) for d in docs[2:4]] == [(3, 9), (10, 17)]
    assert docs[2].version == 2 and store.exists(docs[2].pdf_key or "")
    assert "documents 2 and 3 merged" in _post(client, job, 2, action="merge", version="2")
    docs = state.list_documents(job)
    assert len(docs) == 15 and (docs[2].first_page, docs[2].last_page, docs[2].version) == (3, 17, 3)
    assert [c.kind for c in state.list_corrections(job)] == ["split", "merge"]


def test_a_stale_version_is_refused_and_changes_nothing(ledger: LedgerData, client: TestClient) -> None:
    job, state = ledger.job, ledger.state
    _post(client, job, 0, action="set_class", version="1", value="letter")
    before = (state.list_documents(job), state.list_corrections(job))
    answer = _post(client, job, 0, action="set_class", version="1", value="receipt")
    assert "not done: document" in answer and "is at version 2, not 1" in answer
    assert (state.list_documents(job), state.list_corrections(job)) == before


def test_what_the_desk_refuses_is_said(ledger: LedgerData, client: TestClient) -> None:
    job, state = ledger.job, ledger.state
    answer = _post(client, job, 14, action="merge", version="1")
    assert "not done: merge: this is the last document of its job" in answer
    answer = _post(client, job, 2, action="split", version="1", page="40")
    assert "not done: split at page 40: the document has pages 3-17" in answer
    assert state.list_corrections(job) == []


def test_raybatch_serve_serves_the_ledgers_queue(ledger: LedgerData) -> None:
    from raybatch.console.serve import console_app

    app = console_app(ledger.settings, "127.0.0.1")  # what `raybatch serve` runs
    with TestClient(app, base_url="http://127.0.0.1") as served:
        assert "(15 waiting)" in served.get("/review").text
        assert "accepted document 0" in _post(served, ledger.job, 0, action="accept", version="1")
    assert [c.kind for c in ledger.state.list_corrections(ledger.job)] == ["accept"]


def test_the_queue_page_reads_a_document_and_its_neighbours_not_the_queue(
    ledger: LedgerData, client: TestClient
) -> None:
    with statements(ledger.state) as sent:
        page = client.get(f"/review?job={ledger.job}&index=3").text
    assert f'id="previous" href="/review?job={ledger.job}&amp;index=2"' in page
    assert f"/review?job={ledger.job}&amp;index=4" in page
    queue = [s for s in sent if s.startswith("SELECT") and "documents.review IN" in s]
    assert len(queue) == 2 and all("LIMIT" in s for s in queue)  # next and previous, one row each
