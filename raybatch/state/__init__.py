"""The state store: the database that is the source of truth for jobs, chunks, batches, documents."""

from __future__ import annotations

from pathlib import Path

from raybatch.settings import StateSettings
from raybatch.state.base import Clock, parse_url, utc_now
from raybatch.state.port import BatchRecord, ErrorRecord, StateStore
from raybatch.state.sql import SqlStateStore

__all__ = ["BatchRecord", "ErrorRecord", "SqlStateStore", "StateStore", "open_state"]


def open_state(settings: StateSettings, *, now: Clock = utc_now) -> SqlStateStore:
    """Open the configured database, creating a SQLite file's folder, with the schema at head."""
    url = parse_url(settings.database_url.get_secret_value())
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    store = SqlStateStore.from_url(url, now=now)
    store.migrate()
    store.database_id()  # made with the schema, so the database's outputs have a home from the start
    return store

