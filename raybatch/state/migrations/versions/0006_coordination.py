"""Coordination of several coordinators on one database: heartbeats and the lead lease.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 17:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "coordinators",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_coordinators")),
    )
    op.create_index(op.f("ix_coordinators_expires_at"), "coordinators", ["expires_at"], unique=False)
    op.create_table(
        "coordinator_lead",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("holder", sa.String(length=64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_coordinator_lead")),
    )


def downgrade() -> None:
    op.drop_table("coordinator_lead")
    op.drop_index(op.f("ix_coordinators_expires_at"), table_name="coordinators")
    op.drop_table("coordinators")
