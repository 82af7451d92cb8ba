"""One contract suite, two backends: every test using ``store`` or ``db_url`` runs on a SQLite file
and on the PostgreSQL server (each PostgreSQL test in a schema of its own, dropped afterwards)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TypeVar

import pytest
import sqlalchemy as sa
from clock import FakeClock

from raybatch.state import SqlStateStore, SqlWorkloadStore
from raybatch.state.base import SqlBase

S = TypeVar("S", bound=SqlBase)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """A URL of an empty database of each kind."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'state.db'}"
        return
    base = request.getfixturevalue("postgres_url")
    schema = f"test_{uuid.uuid4().hex[:16]}"
    admin = sa.create_engine(base)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        # Tests need no durable commits; waiting for fsync would triple the suite's time.
        options = f"-csearch_path={schema} -csynchronous_commit=off"
        url = sa.make_url(base).update_query_dict({"options": options})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def clock() -> FakeClock:
    """The store's clock; tests move it instead of sleeping."""
    return FakeClock()


def _migrated(kind: type[S], db_url: str, clock: FakeClock) -> Iterator[S]:
    opened = kind.from_url(db_url, now=clock)
    opened.migrate()
    yield opened
    opened.close()


@pytest.fixture
def store(db_url: str, clock: FakeClock) -> Iterator[SqlStateStore]:
    """A migrated store on each backend."""
    yield from _migrated(SqlStateStore, db_url, clock)


@pytest.fixture
def budget(db_url: str, clock: FakeClock) -> Iterator[SqlWorkloadStore]:
    """The workload budget of a migrated database on each backend."""
    yield from _migrated(SqlWorkloadStore, db_url, clock)
