"""The SQL statements a state store sends while a block runs (for tests of what a query costs)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

from raybatch.state import SqlStateStore


@contextmanager
def statements(store: SqlStateStore) -> Iterator[list[str]]:
    """The SQL statements the store sends while the block runs."""
    seen: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        seen.append(statement)

    sa.event.listen(store._engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(store._engine, "before_cursor_execute", record)
