"""Versioned schema: migrations reach head, are idempotent, agree with the tables; the store travels."""

from __future__ import annotations

import inspect
import pickle

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from clock import FORK, FakeClock
from state_helpers import register

from raybatch.models import Priority
from raybatch.settings import StateSettings
from raybatch.state import SqlStateStore, StateStore, open_state
from raybatch.state.migrate import HEAD, MIGRATIONS, head_revision
from raybatch.state.schema import metadata

TABLES = {
    "jobs",
    "chunks",
    "batches",
    "batch_requests",
    "documents",
    "groups",
    "page_ocr",
    "errors",
    "settings",
    "workload",
}


def test_migrate_reaches_head_and_is_idempotent(db_url: str) -> None:
    store = SqlStateStore.from_url(db_url)
    assert store.schema_revision() is None
    store.migrate()
    store.migrate()
    assert store.schema_revision() == head_revision()
    engine = sa.create_engine(db_url)
    assert set(sa.inspect(engine).get_table_names()) >= TABLES
    engine.dispose()
    store.close()


def test_migrations_create_exactly_the_declared_tables(store: SqlStateStore, db_url: str) -> None:
    engine = sa.create_engine(db_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), metadata)
    engine.dispose()
    assert diff == []


def _migrate(url: str, barrier) -> None:  # type: ignore[no-untyped-def]
    store = SqlStateStore.from_url(url)
    barrier.wait()
    store.migrate()
    store.close()


def test_processes_starting_at_once_migrate_one_fresh_database(db_url: str) -> None:
    barrier = FORK.Barrier(3)
    processes = [FORK.Process(target=_migrate, args=(db_url, barrier)) for _ in range(3)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert SqlStateStore.from_url(db_url).schema_revision() == head_revision()


def test_open_state_makes_the_sqlite_folder_and_the_schema(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "new" / "deeper" / "state.db"
    store = open_state(StateSettings(database_url=f"sqlite:///{path}"))
    assert path.exists() and store.schema_revision() == head_revision()
    assert register(store, 1)[1]
    store.close()


def test_the_store_pickles_by_url_and_clock(store: SqlStateStore, clock: FakeClock) -> None:
    job, _ = register(store, 1)
    copy = pickle.loads(pickle.dumps(store))
    assert copy is not store and copy.url == store.url
    assert copy.get_job(job.id) == job
    assert register(copy, 2)[0].created_at == clock()
    copy.close()


def test_head_names_the_newest_script() -> None:
    """``open_state`` skips Alembic when the database is at ``HEAD``: a new script must move it."""
    assert head_revision() == HEAD


def test_a_database_behind_head_is_upgraded_by_open_state(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'state.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        from alembic import command

        from raybatch.state.migrate import alembic_config

        command.upgrade(alembic_config(conn), "0005")
    engine.dispose()
    store = open_state(StateSettings(database_url=url))
    assert store.schema_revision() == HEAD
    store.close()


def test_migration_scripts_are_in_the_package() -> None:
    names = {path.relative_to(MIGRATIONS).as_posix() for path in MIGRATIONS.rglob("*") if path.is_file()}
    assert {"env.py", "script.py.mako", "versions/0001_initial_schema.py"} <= names


def test_the_sql_store_has_every_method_of_the_port_with_the_same_signature() -> None:
    members = [name for name in dir(StateStore) if not name.startswith("_")]
    assert len(members) > 30
    for name in members:
        port, sql = (
            inspect.signature(getattr(StateStore, name)),
            inspect.signature(getattr(SqlStateStore, name)),
        )
        assert list(port.parameters) == list(sql.parameters), name
        assert [p.default for p in port.parameters.values()] == [
            p.default for p in sql.parameters.values()
        ], name


def test_a_database_at_an_older_revision_upgrades_with_its_rows(db_url: str) -> None:
    """0001 → head: the chunks made before rotations existed keep their rows and read as none; jobs
    made before priorities existed are normal."""
    from alembic import command

    from raybatch.state.migrate import alembic_config

    engine = sa.create_engine(db_url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0001")
        columns = {c["name"] for c in sa.inspect(conn).get_columns("chunks")}
    assert "rotations" not in columns
    store = SqlStateStore.from_url(db_url)
    job = 41
    with engine.begin() as conn:  # rows as 0001 wrote them: no rotations, no priority column
        conn.execute(
            sa.text(
                "INSERT INTO jobs (id, sha256, dedupe_key, source_uri, source_name, kind, size_bytes, "
                "mode, status, progress, attempts, lease_token, created_at, updated_at) VALUES (:job, "
                "'s41', 's41', 'file:///41', '41.pdf', 'pdf', 10, 'batch', 'pending', 0, 0, 0, :now, :now)"
            ),
            {"job": job, "now": "2030-01-01 00:00:00+00:00"},
        )
        conn.execute(
            sa.text(
                "INSERT INTO chunks (job_id, n, first_page, last_page, custom_id, processing_key, status, "
                "request_bytes, attempts, input_tokens, output_tokens, cache_read_tokens, "
                "cache_creation_tokens, created_at, updated_at) VALUES (:job, 0, 1, 8, :cid, 'k', "
                "'prepared', 10, 0, 0, 0, 0, 0, :now, :now)"
            ),
            {"job": job, "cid": f"job_{job}_batch_0", "now": "2030-01-01 00:00:00+00:00"},
        )
    store.migrate()
    assert store.schema_revision() == head_revision()
    [upgraded] = store.get_chunks(job)
    assert (upgraded.custom_id, upgraded.rotations) == (f"job_{job}_batch_0", {})
    assert store.get_job(job).priority is Priority.NORMAL
    engine.dispose()
    store.close()
