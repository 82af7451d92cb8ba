"""The console's pages in-process: what each shows, its filters and keyset pages, the review queue."""

from __future__ import annotations

from console_builders import ConsoleData
from starlette.testclient import TestClient

from raybatch.console.views.job import spans
from raybatch.models import DocumentRecord, JobStatus


def _csrf(text: str) -> str:
    return text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]


def test_the_runs_page_shows_status_counts_failures_and_review(data: ConsoleData, client: TestClient) -> None:
    page = client.get("/").text
    assert 'data-status-count="failed">1<' in page
    assert "broken.pdf is not a PDF" in page
    assert "documents wait for a person" in page
    figures = client.get("/api/summary").json()
    assert figures["jobs"] == 3 and figures["ended"] == 2 and figures["review_waiting"] == 2


def test_the_jobs_list_filters_by_status_and_name(data: ConsoleData, client: TestClient) -> None:
    failed = client.get("/jobs?status=failed").text
    assert "broken.pdf" in failed and "bundle.pdf" not in failed
    found = client.get("/jobs?q=RUNN").text
    assert "running.pdf" in found and "broken.pdf" not in found


def test_the_jobs_list_pages_by_keyset(data: ConsoleData) -> None:
    console = data.console()
    console.page_size = 2
    from raybatch.console.app import build_app
    from raybatch.console.auth import Logins

    client = TestClient(
        build_app(console, Logins(data.state, None, has_users=False)), base_url="http://127.0.0.1"
    )
    first = client.get("/jobs").text
    assert f"before={data.failed}" in first and "bundle.pdf" not in first
    second = client.get(f"/jobs?before={data.failed}").text
    assert "bundle.pdf" in second and "running.pdf" not in second


def test_progress_polls_answer_what_the_database_says_now(data: ConsoleData, client: TestClient) -> None:
    assert client.get(f"/api/progress?ids={data.running}").json()["jobs"][0]["progress"] == 0.0
    data.state.set_progress({data.running: 0.4})
    polled = client.get(f"/api/progress?ids={data.running},{data.done}").json()["jobs"]
    assert [(j["id"], j["progress"]) for j in polled] == [(data.done, 1.0), (data.running, 0.4)]


def test_a_job_shows_its_pages_as_spans_of_its_documents(data: ConsoleData, client: TestClient) -> None:
    page = client.get(f"/jobs/{data.done}").text
    assert page.count('class="span doc') == 3
    assert page.count(f'src="/jobs/{data.done}/pages/') == 6
    assert "0.62" in page and "low confidence" in page and "Acme Ltd" in page
    assert f'href="/jobs/{data.done}/documents/1.pdf"' in page and f'href="/jobs/{data.done}/source"' in page
    image = client.get(f"/jobs/{data.done}/pages/4.png?size=l")
    assert image.status_code == 200 and image.content.startswith(b"\x89PNG")
    assert client.get(f"/jobs/{data.done}/documents/1.pdf").content.startswith(b"%PDF")
    assert client.get(f"/jobs/{data.done}/pages/7.png").status_code == 404


def test_the_strip_marks_pages_no_document_holds() -> None:
    docs = [DocumentRecord(job_id=1, index=0, first_page=2, last_page=3, doc_type="act")]
    assert [(s.first_page, s.last_page, s.document is not None) for s in spans(5, docs)] == [
        (1, 1, False),
        (2, 3, True),
        (4, 5, False),
    ]


def test_a_failed_job_shows_its_reason(data: ConsoleData, client: TestClient) -> None:
    page = client.get(f"/jobs/{data.failed}").text
    assert "InvalidSource: broken.pdf is not a PDF" in page
    assert client.get(f"/jobs/{data.failed}/source").status_code == 404  # its file is not here
    assert client.get("/jobs/999").status_code == 404


def test_documents_are_found_by_class_field_group_and_date(data: ConsoleData, client: TestClient) -> None:
    def found(query: str) -> list[str]:
        text = client.get(f"/documents?{query}").text
        return [kind for kind in ("Invoice 1", "Contract 2", "Letter 3") if kind in text]

    assert found("class=contract") == ["Contract 2"]
    assert found("q=globex") == ["Letter 3"]
    assert found("group=acme-ltd/c-100") == ["Invoice 1", "Contract 2"]
    assert found("from=2026-03&to=2026-05") == ["Invoice 1", "Letter 3"]
    assert found("to=2026-03-04") == ["Invoice 1", "Contract 2"]
    assert client.get("/documents?from=yesterday").status_code == 400
    assert "Acme Ltd · C-100" in client.get("/groups").text
    assert f'href="/jobs/{data.done}/documents/2.pdf"' in client.get("/documents?class=letter").text


def test_a_review_action_is_a_correction_and_its_result_shows(data: ConsoleData, client: TestClient) -> None:
    page = client.get("/review").text
    assert "document 0" in page and 'id="next"' in page
    form = {"action": "set_class", "version": "1", "value": "act", "csrf_token": _csrf(page)}
    answer = client.post(f"/review/{data.done}/0", data=form)
    assert "document 0 is now act" in answer.text and "document 1" in answer.text
    assert data.state.get_document(data.done, 0).doc_type == "act"
    assert data.review.pending_count() == 1


def test_a_split_then_a_merge_rewrite_the_job_documents(data: ConsoleData, client: TestClient) -> None:
    token = _csrf(client.get("/review").text)
    split = {"action": "split", "version": "1", "page": "4", "csrf_token": token}
    client.post(f"/review/{data.done}/1", data=split)
    assert [(d.first_page, d.last_page) for d in data.state.list_documents(data.done)] == [
        (1, 2),
        (3, 3),
        (4, 5),
        (6, 6),
    ]
    merge = {"action": "merge", "version": "1", "csrf_token": token}
    client.post(f"/review/{data.done}/0", data=merge)
    assert [(d.first_page, d.last_page) for d in data.state.list_documents(data.done)] == [
        (1, 3),
        (4, 5),
        (6, 6),
    ]


def test_a_refused_correction_says_why(data: ConsoleData, client: TestClient) -> None:
    token = _csrf(client.get("/review").text)
    answer = client.post(
        f"/review/{data.done}/0", data={"action": "split", "version": "1", "page": "9", "csrf_token": token}
    )
    assert "not done: a split of pages 1-2" in answer.text
    bad = client.post(
        f"/review/{data.done}/0",
        data={"action": "set_field", "version": "1", "name": "x", "csrf_token": token},
    )
    assert bad.status_code == 400


def test_without_a_ledger_the_queue_says_so_and_the_rest_works(data: ConsoleData) -> None:
    from raybatch.console.app import build_app
    from raybatch.console.auth import Logins

    console = data.console()
    console.review = None
    client = TestClient(
        build_app(console, Logins(data.state, None, has_users=False)), base_url="http://127.0.0.1"
    )
    assert client.get("/review").status_code == 404
    assert "no review ledger connected" in client.get("/").text
    assert data.state.get_job(data.done).status is JobStatus.COMPLETED


def test_a_database_outage_is_a_503_without_a_traceback(data: ConsoleData, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from raybatch.errors import DatabaseUnavailable

    def down(*_: object, **__: object) -> None:
        raise DatabaseUnavailable("the database at sqlite:///secret-place.db does not answer")

    client = TestClient(data.app(), base_url="http://127.0.0.1", raise_server_exceptions=False)
    monkeypatch.setattr(data.state, "page_jobs", down)
    monkeypatch.setattr(data.state, "get_job", down)
    for path in ("/jobs", f"/jobs/{data.done}"):
        answer = client.get(path)
        assert answer.status_code == 503 and "try again" in answer.text
        assert "secret-place" not in answer.text and "Traceback" not in answer.text
