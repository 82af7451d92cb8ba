"""The answers a redo replaced keep their usage, so every total and spend cap still counts them.

Revision ID: 0600_replaced_answers
Revises: 0300_text_key
Create Date: 2026-12-02 01:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0600_replaced_answers"
down_revision: str | Sequence[str] | None = "0300_text_key"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "replaced_answers",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("custom_id", sa.String(length=64), nullable=False),
        sa.Column("sent_mode", sa.String(length=8), nullable=True),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_creation_tokens", sa.BigInteger(), nullable=False),
        sa.Column("emulated", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_replaced_answers_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_replaced_answers")),
    )
    op.create_index(op.f("ix_replaced_answers_job_id"), "replaced_answers", ["job_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_replaced_answers_job_id"), table_name="replaced_answers")
    op.drop_table("replaced_answers")
