"""The console's security: reach, CSRF on every POST, ids in routes, headers, roles, logins."""

from __future__ import annotations

import pytest
from console_builders import ConsoleData
from pydantic import SecretStr
from starlette.routing import Route
from starlette.testclient import TestClient

from raybatch.cli import main
from raybatch.console.auth import Logins, add_user
from raybatch.models import ConsoleRole

PASSWORD = "correct horse battery"


def _logged_in(data: ConsoleData, name: str, role: ConsoleRole) -> TestClient:
    add_user(data.state, name, role, PASSWORD)
    client = TestClient(data.app(Logins(data.state, None, has_users=True)), base_url="http://console.example")
    client.get("/login")
    answer = client.post(
        "/login", data={"name": name, "password": PASSWORD, "csrf_token": _csrf(client, "/login")}
    )
    assert answer.status_code == 200 and name in answer.text
    return client


def _csrf(client: TestClient, page: str) -> str:
    text = client.get(page).text
    return text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]


def test_a_non_loopback_host_without_a_login_refuses_to_start(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    code = main(
        ["serve", "--host", "0.0.0.0", "--db", f"sqlite:///{tmp_path / 's.db'}", "--store", str(tmp_path)]
    )
    assert code == 2
    assert "no login is configured" in capsys.readouterr().err


def test_every_post_route_refuses_a_missing_or_wrong_csrf_token(
    data: ConsoleData, client: TestClient
) -> None:
    posts = [r for r in data.app().routes if isinstance(r, Route) and "POST" in (r.methods or ())]
    assert {r.path for r in posts} >= {"/login", "/logout", "/review/{job_id:int}/{index:int}"}
    client.get("/")
    for route in posts:
        path = route.path.replace("{job_id:int}", str(data.done)).replace("{index:int}", "0")
        for token in ({}, {"csrf_token": "forged"}):
            answer = client.post(
                path, data={"action": "accept", "version": "1", **token}, follow_redirects=False
            )
            assert answer.status_code == 403, (path, token)
    assert data.review.corrections == []


def test_a_post_from_another_origin_is_refused_even_with_the_token(
    data: ConsoleData, client: TestClient
) -> None:
    token = _csrf(client, "/review")
    form = {"action": "accept", "version": "1", "csrf_token": token}
    answer = client.post(f"/review/{data.done}/0", data=form, headers={"origin": "http://evil.example"})
    assert answer.status_code == 403
    assert client.post(f"/review/{data.done}/0", data=form, follow_redirects=False).status_code == 303


@pytest.mark.parametrize(
    "path",
    [
        "/jobs/..%2f..%2fetc%2fpasswd",
        "/jobs/1%2f..%2f..%2fstate.db",
        "/jobs/-1",
        "/jobs/1/pages/..%2fsource.png",
        "/jobs/1/pages/1%2e%2e.png",
        "/jobs/1/documents/..%2f..%2fmanifest.json.pdf",
        "/jobs/1/documents/0%2f..%2f1.pdf",
        "/jobs/%2e%2e/source",
        "/jobs/1/source%2f..%2f..",
        "/static/..%2f..%2fsettings.py",
        "/static/../app.py",
        "/review/1/..%2f0",
    ],
)
def test_traversal_attempts_in_every_id_find_nothing(client: TestClient, path: str) -> None:
    answer = client.get(path)
    assert answer.status_code in (400, 404, 405), path
    assert "import" not in answer.text and "sqlite" not in answer.text.lower()


@pytest.mark.parametrize(
    "query",
    ["/review?job=../1&index=0", "/jobs?before=1%20OR%201", "/api/progress?ids=1;DROP", "/jobs?status=x"],
)
def test_ids_in_the_query_are_numbers_or_refused(client: TestClient, query: str) -> None:
    assert client.get(query).status_code == 400


def test_every_answer_carries_the_security_headers(data: ConsoleData, client: TestClient) -> None:
    for path in ("/", f"/jobs/{data.done}", f"/jobs/{data.done}/pages/1.png", "/static/console.js", "/nope"):
        headers = client.get(path).headers
        assert "frame-ancestors 'none'" in headers["content-security-policy"], path
        assert "script-src 'self'" in headers["content-security-policy"]
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "same-origin"


def test_without_a_login_only_loopback_host_names_are_answered(client: TestClient) -> None:
    assert client.get("/", headers={"host": "evil.example"}).status_code == 400
    assert client.get("/", headers={"host": "localhost:8700"}).status_code == 200


def test_with_users_a_page_asks_for_a_login_and_a_wrong_password_is_refused(data: ConsoleData) -> None:
    add_user(data.state, "ana", ConsoleRole.REVIEWER, PASSWORD)
    client = TestClient(data.app(Logins(data.state, None, has_users=True)), base_url="http://console.example")
    assert client.get("/jobs", follow_redirects=False).headers["location"] == "/login"
    assert client.get("/api/summary").status_code == 401
    wrong = client.post(
        "/login", data={"name": "ana", "password": "nope-nope", "csrf_token": _csrf(client, "/login")}
    )
    assert wrong.status_code == 401 and "wrong name or password" in wrong.text
    assert client.get("/jobs", follow_redirects=False).status_code == 303


def test_a_reader_reads_but_cannot_review(data: ConsoleData) -> None:
    client = _logged_in(data, "rita", ConsoleRole.READER)
    page = client.get("/review")
    assert page.status_code == 200 and 'id="accept"' not in page.text
    token = page.text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
    answer = client.post(
        f"/review/{data.done}/0", data={"action": "accept", "version": "1", "csrf_token": token}
    )
    assert answer.status_code == 403
    assert data.review.corrections == []


def test_the_reviewer_of_a_correction_is_the_logged_in_user(data: ConsoleData) -> None:
    client = _logged_in(data, "ana", ConsoleRole.REVIEWER)
    token = _csrf(client, "/review")
    client.post(f"/review/{data.done}/0", data={"action": "accept", "version": "1", "csrf_token": token})
    assert [c.reviewer for c in data.review.corrections] == ["ana"]


def test_a_token_logs_in_and_is_never_shown(data: ConsoleData) -> None:
    secret = "s3cret-console-token-value"
    client = TestClient(
        data.app(Logins(data.state, SecretStr(secret), has_users=False)), base_url="http://c.example"
    )
    answer = client.post("/login", data={"password": secret, "csrf_token": _csrf(client, "/login")})
    assert answer.status_code == 200 and "token · reviewer" in answer.text
    for path in ("/", "/jobs", "/review", "/api/summary"):
        assert secret not in client.get(path).text
    assert secret not in str(client.cookies)


def test_passwords_are_stored_as_argon2_hashes(data: ConsoleData) -> None:
    add_user(data.state, "ana", ConsoleRole.REVIEWER, PASSWORD)
    user = data.state.get_console_user("ana")
    assert (
        user is not None
        and user.password_hash.startswith("$argon2id$")
        and PASSWORD not in user.password_hash
    )


def test_users_add_makes_a_login_and_serve_then_accepts_any_host(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    import io

    from raybatch.console.serve import console_app

    db = f"sqlite:///{tmp_path / 's.db'}"
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    assert main(["users", "add", "ana", "--role", "reviewer", "--password-stdin", "--db", db]) == 0
    assert main(["users", "--db", db]) == 0
    assert "ana\treviewer" in capsys.readouterr().out
    from raybatch.settings import load_settings

    console_app(load_settings(database_url=db, store=str(tmp_path / "store")), "0.0.0.0")  # no refusal
