"""Chunks keep the rotation of each page found while preparing them.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 04:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("chunks") as batch:
        batch.add_column(sa.Column("rotations", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("chunks") as batch:
        batch.drop_column("rotations")
