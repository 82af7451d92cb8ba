"""What every part of ``SqlStateStore`` shares: the URL, the engine, the clock and short transactions."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Self

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, Connection

from raybatch.errors import ConfigError
from raybatch.models import Lease
from raybatch.state.engine import READ_ONLY, create_state_engine, database_errors, safe_url
from raybatch.state.migrate import current_revision, upgrade_to_head
from raybatch.state.schema import jobs

Clock = Callable[[], datetime]

MAX_MESSAGE_CHARS = 2000  # error messages kept in the database are cut to this length
IN_CLAUSE_SIZE = 500  # ids per IN (...) list, well below every backend's parameter limit


def utc_now() -> datetime:
    """The wall clock in UTC: the default clock of the store."""
    return datetime.now(UTC)


def parse_url(url: str | URL) -> URL:
    """A SQLAlchemy URL, or a ConfigError that does not repeat the (possibly secret) text."""
    try:
        return sa.make_url(url)
    except sa_exc.ArgumentError:
        raise ConfigError("DATABASE_URL is not a valid SQLAlchemy URL") from None


def _rebuild(cls: type[SqlBase], url: str, now: Clock) -> SqlBase:
    return cls.from_url(url, now=now)


class SqlBase:
    """Connection handling for the SQL state store; the query mixins build on it."""

    def __init__(self, url: str | URL, *, now: Clock = utc_now) -> None:
        self._url = parse_url(url)
        self._clock = now
        self._engine = create_state_engine(self._url)
        self._reader = self._engine.execution_options(**{READ_ONLY: True})
        self._dialect = self._engine.dialect.name

    @classmethod
    def from_url(cls, url: str | URL, *, now: Clock = utc_now) -> Self:
        """A store on ``url`` (schema not touched: call ``migrate`` or use ``open_state``)."""
        return cls(url, now=now)

    def __reduce__(self) -> tuple[Any, ...]:
        # Ray and multiprocessing get the URL and clock; each process opens its own engine.
        return (_rebuild, (type(self), self._url.render_as_string(hide_password=False), self._clock))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({safe_url(self._url)!r})"

    @property
    def url(self) -> str:
        """The database URL with its password masked."""
        return safe_url(self._url)

    def migrate(self) -> None:
        """Upgrade the schema to the newest packaged revision; idempotent."""
        with database_errors(self._url):
            upgrade_to_head(self._engine)

    def schema_revision(self) -> str | None:
        """The schema revision the database is at (None before the first migration)."""
        with database_errors(self._url):
            return current_revision(self._engine)

    def close(self) -> None:
        """Close pooled connections; the store reconnects if used again."""
        self._engine.dispose()

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """One short write transaction (BEGIN IMMEDIATE on SQLite)."""
        with database_errors(self._url), self._engine.begin() as conn:
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        """One read transaction, which never waits for writers."""
        with database_errors(self._url), self._reader.begin() as conn:
            yield conn

    def _now(self) -> datetime:
        value = self._clock()
        if value.tzinfo is None:
            raise ValueError("the state store's clock must return aware datetimes")
        return value.astimezone(UTC)

    def _insert(self, table: sa.Table) -> Any:
        """An INSERT that knows ``ON CONFLICT`` on this backend."""
        return insert_on(self._dialect, table)


def insert_on(dialect: str, table: sa.Table) -> Any:
    """An INSERT that knows ``ON CONFLICT`` on this backend."""
    return postgresql.insert(table) if dialect == "postgresql" else sqlite.insert(table)


RELEASED_LEASE = {"lease_owner": None, "lease_expires_at": None}  # the job columns a release clears


def held_by(lease: Lease) -> sa.ColumnElement[bool]:
    """The jobs row ``lease`` still holds (same owner and token, not released)."""
    return sa.and_(
        jobs.c.id == lease.job_id,
        jobs.c.lease_token == lease.token,
        jobs.c.lease_owner == lease.worker_id,
        jobs.c.lease_expires_at.is_not(None),
    )


@functools.lru_cache(maxsize=1)
def held_by_all() -> sa.ColumnElement[bool]:
    """The jobs rows a list of leases still hold (``held_by`` of each), in one condition built
    once: bind ``held_values(leases)`` at execution."""
    return sa.and_(
        jobs.c.id.in_(sa.bindparam("held_ids", expanding=True)),  # lets every backend find them by key
        sa.tuple_(jobs.c.id, jobs.c.lease_token, jobs.c.lease_owner).in_(
            sa.bindparam("held_leases", expanding=True)
        ),
        jobs.c.lease_expires_at.is_not(None),
    )


def held_values(leases: Sequence[Lease]) -> dict[str, Any]:
    """The values ``held_by_all`` is executed with."""
    return {
        "held_ids": [lease.job_id for lease in leases],
        "held_leases": [(lease.job_id, lease.token, lease.worker_id) for lease in leases],
    }


def clip(message: str) -> str:
    """An error message cut to what the database keeps."""
    return message if len(message) <= MAX_MESSAGE_CHARS else message[: MAX_MESSAGE_CHARS - 1] + "…"


def in_groups(values: list[Any]) -> Iterator[list[Any]]:
    """``values`` in slices small enough for one IN (...) list."""
    for start in range(0, len(values), IN_CLAUSE_SIZE):
        yield values[start : start + IN_CLAUSE_SIZE]
