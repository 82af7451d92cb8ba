"""Database failures become raybatch errors, and no password ever reaches a message or a log."""

from __future__ import annotations

import logging
import sqlite3
import traceback

import pytest
import sqlalchemy as sa
from state_helpers import chunk

from raybatch.errors import ConfigError, DatabaseUnavailable, PermanentError
from raybatch.state import SqlStateStore

SECRET = "Sup3r-S3cret-pw"


def _everything_said(exc: BaseException, caplog: pytest.LogCaptureFixture) -> str:
    return "".join(traceback.format_exception(exc)) + caplog.text


def test_an_unreachable_database_is_transient_and_hides_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    store = SqlStateStore.from_url(f"postgresql+psycopg://raybatch:{SECRET}@127.0.0.1:1/raybatch")
    with pytest.raises(DatabaseUnavailable) as caught:
        store.is_paused()
    assert "127.0.0.1" in str(caught.value)
    assert SECRET not in _everything_said(caught.value, caplog)
    assert SECRET not in repr(store) + store.url


@pytest.mark.postgres
def test_a_wrong_password_is_not_echoed(postgres_url: str, caplog: pytest.LogCaptureFixture) -> None:
    url = sa.make_url(postgres_url).set(password=SECRET)
    store = SqlStateStore.from_url(url)
    with pytest.raises(DatabaseUnavailable) as caught:
        store.migrate()
    assert SECRET not in _everything_said(caught.value, caplog)
    store.close()


def test_an_invalid_url_is_a_config_error_that_does_not_repeat_it() -> None:
    with pytest.raises(ConfigError) as caught:
        SqlStateStore.from_url(f"no-scheme-{SECRET}")
    assert SECRET not in str(caught.value)


def test_a_locked_sqlite_file_is_transient(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "state.db"
    store = SqlStateStore.from_url(f"sqlite:///{path}?timeout=0.05")
    store.migrate()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with pytest.raises(DatabaseUnavailable, match="locked"):
            store.set_paused(True)
        assert not store.is_paused()  # readers are not blocked under WAL
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store.set_paused(True)
    assert store.is_paused()
    store.close()


def test_rows_of_an_unknown_job_are_a_permanent_conflict(store: SqlStateStore) -> None:
    with pytest.raises(PermanentError, match="state conflict"):
        store.save_chunks(4242, [chunk(4242, 0)])


@pytest.mark.parametrize(
    ("password", "said", "shown"),
    [
        (
            "ss",
            'password authentication failed for user "raybatch"',
            'password authentication failed for user "raybatch"',
        ),
        ("ss", "bad dsn: password=ss host=db", "bad dsn: password=*** host=db"),
        (SECRET, f"connection to raybatch:{SECRET}@db refused", "connection to raybatch:***@db refused"),
    ],
)
def test_a_password_is_masked_as_a_whole_token_in_a_drivers_message(
    password: str, said: str, shown: str
) -> None:
    from raybatch.state.engine import _describe

    url = sa.make_url("postgresql+psycopg://raybatch@db/raybatch").set(password=password)
    error = sa.exc.OperationalError("SELECT 1", {}, Exception(said))
    assert _describe(url, error) == f"Exception: {shown}"
