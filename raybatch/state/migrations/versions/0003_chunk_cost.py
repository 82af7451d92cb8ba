"""Chunks record how they were answered: emulated or not, the mode they were sent in, when, at what
expected cost, and the chunk whose answer they reused.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 14:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("chunks") as batch:
        batch.add_column(sa.Column("emulated", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("sent_mode", sa.String(8), nullable=True))
        batch.add_column(sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("estimated_cost_usd", sa.Float(), nullable=True))
        batch.add_column(sa.Column("reused_from", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("chunks") as batch:
        for name in ("reused_from", "estimated_cost_usd", "sent_at", "sent_mode", "emulated"):
            batch.drop_column(name)
