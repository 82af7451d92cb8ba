"""The state side of classes files: documents keep their fields as JSON with their problems and the
repaired flag; the migration moves existing rows' seven fields into it; classes files are kept."""

from __future__ import annotations

import sqlalchemy as sa
from state_helpers import register

from raybatch.models import DocumentRecord
from raybatch.state import SqlStateStore
from raybatch.state.migrate import alembic_config, head_revision


def test_values_problems_and_the_repaired_flag_round_trip(store: SqlStateStore) -> None:
    job, _ = register(store, 1)
    doc = DocumentRecord(
        job.id, 0, 1, 2, "commercial_invoice",
        values={"total": None, "line_items": [{"description": "bolts", "amount": 3.5}], "currency": "RUB"},
        problems=(("currency", "not one of USD, EUR"),),
        repaired=True,
    )  # fmt: skip
    store.upsert_documents(job.id, [doc])
    assert store.list_documents(job.id) == [doc]


def test_a_classes_file_is_kept_once_by_its_hash(store: SqlStateStore) -> None:
    store.put_classes_file("ab" * 32, "mine.yaml", "classes: {}", "{}")
    store.put_classes_file("ab" * 32, "other.yaml", "changed", "changed")
    assert store.get_classes_file("ab" * 32) == ("mine.yaml", "classes: {}", "{}")
    assert store.get_classes_file("cd" * 32) is None


def test_the_migration_keeps_existing_documents_and_their_fields(db_url: str) -> None:
    from alembic import command

    engine = sa.create_engine(db_url)
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0006")
        now = "2030-01-01 00:00:00+00:00"
        conn.execute(
            sa.text(
                "INSERT INTO jobs (id, sha256, dedupe_key, source_uri, source_name, kind, size_bytes, mode, "
                "priority, status, progress, attempts, lease_token, created_at, updated_at) "
                "VALUES (7, 's', 's', 'file:///7', '7.pdf', 'pdf', 10, 'batch', 'normal', 'completed', "
                "100, 0, 0, :now, :now)"
            ),
            {"now": now},
        )
        conn.execute(
            sa.text(
                "INSERT INTO documents (job_id, doc_index, first_page, last_page, doc_type, title, amount, "
                "counterparty, fields, extra, created_at, updated_at) VALUES (7, 0, 1, 3, 'invoice', "
                "'Invoice 5', 12.5, 'ACME', '{}', '{}', :now, :now)"
            ),
            {"now": now},
        )
    store = SqlStateStore.from_url(db_url)
    store.migrate()
    assert store.schema_revision() == head_revision()
    [doc] = store.list_documents(7)
    assert (doc.doc_type, doc.title, doc.amount, doc.counterparty, doc.date) == (
        "invoice",
        "Invoice 5",
        12.5,
        "ACME",
        None,
    )
    assert (doc.problems, doc.repaired, store.get_job(7).classes_sha) == ((), False, None)
    engine.dispose()
    store.close()
