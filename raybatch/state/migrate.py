"""Versioned schema creation: the Alembic scripts shipped in ``migrations/``, run programmatically.

Alembic (with Mako and Pygments behind it) is imported only when a database is not at ``HEAD``:
every process opens the state store, and almost every time the schema is already there.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")
HEAD = "0700_batch_creator"  # the newest script's revision (a test checks it against the scripts)
# Concurrent upgrades of one PostgreSQL database queue on this advisory lock (SQLite's BEGIN
# IMMEDIATE does the same job there).
_PG_LOCK_KEY = 0x7261796261746368  # "raybatch"


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config pointing at the packaged scripts, bound to ``connection`` when given."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("path_separator", "os")
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest revision the packaged scripts define."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migration scripts packaged"
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at; None for an empty database."""
    with engine.connect() as conn:
        return _revision(conn)


def _revision(conn: Connection) -> str | None:
    if not sa.inspect(conn).has_table("alembic_version"):
        return None
    versions = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars().all()
    return versions[0] if len(versions) == 1 else None


def upgrade_to_head(engine: Engine) -> None:
    """Bring the schema to the newest revision, in one transaction; a no-op when already there."""
    if current_revision(engine) == HEAD:
        return
    from alembic import command

    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
        command.upgrade(alembic_config(conn), "head")
