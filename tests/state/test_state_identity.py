"""Every database has its own identity, made once and kept: the root of its outputs in a store."""

from __future__ import annotations

from raybatch.ids import OutputKeys
from raybatch.state import SqlStateStore


def test_the_identity_is_made_once_and_kept(store: SqlStateStore, db_url: str) -> None:
    made = store.database_id()
    again = SqlStateStore.from_url(db_url)  # another process on the same database
    assert again.database_id() == made == store.database_id()
    assert OutputKeys(made).root == f"db-{made[:16]}"


def test_two_databases_have_two_identities(store: SqlStateStore, tmp_path) -> None:  # type: ignore[no-untyped-def]
    other = SqlStateStore.from_url(f"sqlite:///{tmp_path / 'other.db'}")
    other.migrate()
    assert other.database_id() != store.database_id()
