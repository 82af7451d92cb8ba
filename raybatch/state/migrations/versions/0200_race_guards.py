"""Guards for runs and coordinators racing on one database: each job names the capped run whose
spend cap governs it, a request held by a batch intent still CREATING is unique, and a batch
adopted after a failed create is marked so (its creator's own record takes it back).

Revision ID: 0200_race_guards
Revises: 0400_console
Create Date: 2026-12-01 22:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0200_race_guards"
down_revision: str | Sequence[str] | None = "0400_console"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("spend_run", sa.String(64), nullable=True))
    with op.batch_alter_table("batch_requests") as batch:
        batch.add_column(sa.Column("creating", sa.String(64), nullable=True))
    with op.batch_alter_table("batches") as batch:
        batch.add_column(sa.Column("adopted", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_index(op.f("ix_jobs_spend_run"), "jobs", ["spend_run"], unique=False)
    # Existing rows keep NULL (NULLs are distinct): only intents recorded from now on are guarded.
    op.create_index(op.f("uq_batch_requests_creating"), "batch_requests", ["creating"], unique=True)


def downgrade() -> None:
    op.drop_index(op.f("uq_batch_requests_creating"), table_name="batch_requests")
    op.drop_index(op.f("ix_jobs_spend_run"), table_name="jobs")
    with op.batch_alter_table("batches") as batch:
        batch.drop_column("adopted")
    with op.batch_alter_table("batch_requests") as batch:
        batch.drop_column("creating")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("spend_run")
