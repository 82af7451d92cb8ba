"""Jobs carry a priority: urgent (sent synchronously, taken first everywhere) or normal.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 17:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("priority", sa.String(8), nullable=False, server_default="normal"))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("priority")
