"""Engines for the state database, and the one place its errors become raybatch errors.

SQLite is shared by many processes (Ray workers): WAL, a busy timeout, and ``BEGIN IMMEDIATE`` for
write transactions so a writer waits for the lock up front instead of failing half-way. Read
transactions use a plain ``BEGIN``, which never blocks writers under WAL.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection, Engine

from raybatch.errors import DatabaseUnavailable, PermanentError
from raybatch.retry import Backoff, retrying

READ_ONLY = "raybatch_read_only"  # execution option: a read transaction (plain BEGIN on SQLite)
SQLITE_BUSY_SECONDS = 30.0  # default wait for SQLite's lock; ``?timeout=S`` in the URL overrides
PG_CONNECT_TIMEOUT_SECONDS = 10
WAL_BACKOFF = Backoff(initial=0.02, factor=1.0, cap=0.02)  # while another process switches to WAL


def safe_url(url: URL) -> str:
    """The URL as it may appear in logs and messages: the password masked."""
    return url.render_as_string(hide_password=True)


def create_state_engine(url: URL) -> Engine:
    """An engine for ``url``; parameters are kept out of error messages (they can hold page text)."""
    if url.get_backend_name() == "sqlite":
        busy = float(url.query.get("timeout", SQLITE_BUSY_SECONDS))  # type: ignore[arg-type]
        engine = sa.create_engine(url, hide_parameters=True, connect_args={"timeout": busy})
        _tune_sqlite(engine, busy)
        return engine
    connect_args: dict[str, Any] = {}
    if url.get_backend_name() == "postgresql":
        connect_args["connect_timeout"] = PG_CONNECT_TIMEOUT_SECONDS
    return sa.create_engine(
        url,
        hide_parameters=True,
        pool_pre_ping=True,
        pool_size=2,
        max_overflow=6,
        connect_args=connect_args,
    )


def _tune_sqlite(engine: Engine, busy_seconds: float) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control from the sqlite3 module: SQLAlchemy emits BEGIN itself (below).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(busy_seconds * 1000)}")
        _enter_wal(cursor, busy_seconds)
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        read_only = conn.get_execution_options().get(READ_ONLY, False)
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


def _enter_wal(cursor: Any, busy_seconds: float) -> None:
    """Switch to WAL; SQLite answers "locked" at once (no busy wait) while another process does it."""
    retrying(
        lambda: cursor.execute("PRAGMA journal_mode = WAL"),
        backoff=WAL_BACKOFF,
        budget=busy_seconds,
        to_the_end=True,
        retry_on=sqlite3.OperationalError,
        retry_if=lambda exc: "locked" in str(exc),
    )


def _describe(url: URL, exc: sa_exc.SQLAlchemyError) -> str:
    """A short, secret-free account of a database error: its driver class and first line."""
    orig = getattr(exc, "orig", None) or exc
    first = (str(orig).strip().splitlines() or [""])[0][:200]
    if url.password:  # as a whole token: a short password must not mangle the words around it
        first = re.sub(rf"(?<!\w){re.escape(str(url.password))}(?!\w)", "***", first)
    return f"{type(orig).__name__}: {first}"


@contextmanager
def database_errors(url: URL) -> Iterator[None]:
    """Translate SQLAlchemy and driver errors into the raybatch error tree."""
    try:
        yield
    except sa_exc.IntegrityError as exc:
        raise PermanentError(f"state conflict in {safe_url(url)}: {_describe(url, exc)}") from exc
    except (
        sa_exc.OperationalError,
        sa_exc.InterfaceError,
        sa_exc.DisconnectionError,
        sa_exc.TimeoutError,
    ) as exc:
        raise DatabaseUnavailable(
            f"state database {safe_url(url)} unavailable: {_describe(url, exc)}"
        ) from exc
    except sa_exc.DBAPIError as exc:
        if exc.connection_invalidated:
            raise DatabaseUnavailable(
                f"state database {safe_url(url)} connection lost: {_describe(url, exc)}"
            ) from exc
        raise
