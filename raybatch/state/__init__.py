"""The state store: the database that is the source of truth for jobs, chunks, batches, documents."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TypeVar

from raybatch.errors import ConfigError
from raybatch.objects.files import make_private_folders
from raybatch.settings import StateSettings
from raybatch.state.base import Clock, SqlBase, parse_url, utc_now
from raybatch.state.port import BatchRecord, ErrorRecord, StateStore
from raybatch.state.sql import SqlStateStore
from raybatch.state.workload import SqlWorkloadStore, WorkloadLease, WorkloadStore

__all__ = [
    "BatchRecord",
    "ErrorRecord",
    "SqlStateStore",
    "SqlWorkloadStore",
    "StateStore",
    "WorkloadLease",
    "WorkloadStore",
    "open_state",
    "open_workload",
]

StoreT = TypeVar("StoreT", bound=SqlBase)


def open_state(settings: StateSettings, *, now: Clock = utc_now, existing: bool = False) -> SqlStateStore:
    """Open the configured database, creating a SQLite file's folder, with the schema at head.
    ``existing``: for commands that only read, a SQLite file that is not there is an error, not made."""
    if existing:
        require_existing(settings)
    store = _open(SqlStateStore, settings, now)
    store.database_id()  # made with the schema, so the database's outputs have a home from the start
    return store


def open_workload(settings: StateSettings, *, now: Clock = utc_now) -> SqlWorkloadStore:
    """Open the configured database's workload budget, the same way as ``open_state``."""
    return _open(SqlWorkloadStore, settings, now)


def require_existing(settings: StateSettings) -> None:
    """Refuse a SQLite database that does not exist yet (read-only commands never create one)."""
    url = parse_url(settings.database_url.get_secret_value())
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return
    path = Path(url.database).expanduser()
    if not path.is_file():
        raise ConfigError(f"no database at {path}: run `raybatch run` first, or name one with --db")


def _open(kind: type[StoreT], settings: StateSettings, now: Clock) -> StoreT:
    url = parse_url(settings.database_url.get_secret_value())
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        _make_private_file(Path(url.database).expanduser())
    store = kind.from_url(url, now=now)
    store.migrate()
    return store


def _make_private_file(path: Path) -> None:
    """A new SQLite file, and the folders made for it, readable by their owner only (SQLite gives
    its journal files the database file's mode); an existing file is left as it is."""
    make_private_folders(path.parent)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
