"""Classes files: documents keep their fields as JSON (JSONB on PostgreSQL), with the problems their
values had and whether their answer was repaired; jobs record the classes file they were written
under, and ``classes_files`` keeps each file. Existing rows keep their seven fields, moved into
``field_values``.

Revision ID: 0100_classes
Revises: 0500_review
Create Date: 2026-12-01 22:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0100_classes"
down_revision: str | Sequence[str] | None = "0500_review"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_FIELDS = ("title", "date", "number", "counterparty", "amount", "currency", "reference")
_JSON = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "classes_files",
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("canonical", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("sha256", name=op.f("pk_classes_files")),
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("classes_sha", sa.String(length=64), nullable=True))
    with op.batch_alter_table("documents") as batch:
        batch.add_column(sa.Column("field_values", _JSON, nullable=True))
        batch.add_column(sa.Column("problems", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("repaired", sa.Boolean(), nullable=False, server_default=sa.false()))
    _move_fields_into_json()
    with op.batch_alter_table("documents") as batch:
        batch.alter_column("field_values", existing_type=_JSON, nullable=False)
        batch.alter_column("problems", existing_type=sa.JSON(), nullable=False)
        for name in OLD_FIELDS:
            batch.drop_column(name)


def _move_fields_into_json() -> None:
    documents = sa.table(
        "documents",
        sa.column("id", sa.Integer),
        *(sa.column(name) for name in OLD_FIELDS),
        sa.column("field_values", _JSON),
        sa.column("problems", sa.JSON()),
    )
    conn = op.get_bind()
    rows = conn.execute(sa.select(documents.c.id, *(documents.c[name] for name in OLD_FIELDS))).all()
    for row in rows:
        values = {name: getattr(row, name) for name in OLD_FIELDS}
        update = sa.update(documents).where(documents.c.id == row.id)
        conn.execute(update.values(field_values=values, problems=[]))


def downgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        for name in OLD_FIELDS:
            kind = sa.Float() if name == "amount" else sa.String(16) if name == "currency" else sa.Text()
            batch.add_column(sa.Column(name, kind, nullable=True))
    documents = sa.table("documents", sa.column("id", sa.Integer), sa.column("field_values", _JSON),
                         *(sa.column(name) for name in OLD_FIELDS))  # fmt: skip
    conn = op.get_bind()
    for row in conn.execute(sa.select(documents.c.id, documents.c.field_values)).all():
        values = {name: (row.field_values or {}).get(name) for name in OLD_FIELDS}
        conn.execute(sa.update(documents).where(documents.c.id == row.id).values(values))
    with op.batch_alter_table("documents") as batch:
        for name in ("field_values", "problems", "repaired"):
            batch.drop_column(name)
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("classes_sha")
    op.drop_table("classes_files")
