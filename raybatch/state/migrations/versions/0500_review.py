"""Review: document versions, review state and the corrections ledger.

Revision ID: 0500_review
Revises: 0200_race_guards
Create Date: 2026-12-01 22:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0500_review"
down_revision: str | Sequence[str] | None = "0200_race_guards"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("documents") as batch:  # rows made before: version 1, no review asked
        batch.add_column(sa.Column("version", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("confidence", sa.Float(), nullable=True))
        batch.add_column(sa.Column("review", sa.String(length=16), nullable=False, server_default="none"))
        batch.add_column(sa.Column("review_reasons", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("field_confidence", sa.JSON(), nullable=True))
        batch.create_index(op.f("ix_documents_review"), ["review"], unique=False)
    op.create_table(
        "corrections",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("idempotency_key", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("doc_index", sa.Integer(), nullable=False),
        sa.Column("base_version", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("reviewer", sa.String(length=200), nullable=False),
        sa.Column("change", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_corrections_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_corrections")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_corrections_idempotency_key")),
    )
    op.create_index(op.f("ix_corrections_job_id"), "corrections", ["job_id"], unique=False)
    op.create_table(
        "document_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("doc_index", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("record", sa.JSON(), nullable=False),
        sa.Column("pdf_key", sa.Text(), nullable=True),
        sa.Column("thumb_key", sa.Text(), nullable=True),
        sa.Column("replaced_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_document_versions_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["replaced_by"],
            ["corrections.id"],
            name=op.f("fk_document_versions_replaced_by_corrections"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_document_versions")),
        sa.UniqueConstraint(
            "job_id", "doc_index", "version", name=op.f("uq_document_versions_job_id_doc_index_version")
        ),
    )


def downgrade() -> None:
    op.drop_table("document_versions")
    op.drop_index(op.f("ix_corrections_job_id"), table_name="corrections")
    op.drop_table("corrections")
    with op.batch_alter_table("documents") as batch:
        batch.drop_index(op.f("ix_documents_review"))
        for name in ("field_confidence", "review_reasons", "review", "confidence", "version"):
            batch.drop_column(name)
