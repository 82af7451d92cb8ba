"""The workload budget: leases on cost units shared by runs and other heavy work.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 14:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "workload",
        sa.Column("lease_id", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=200), nullable=False),
        sa.Column("units", sa.Integer(), nullable=False),
        sa.Column("elastic", sa.Boolean(), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("lease_id", name=op.f("pk_workload")),
    )
    op.create_index(op.f("ix_workload_expires_at"), "workload", ["expires_at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_workload_expires_at"), table_name="workload")
    op.drop_table("workload")
