"""Each batch names the coordinator that recorded it: that one polls it while it beats (its own
settings and key), the lead only once it stopped.

Revision ID: 0700_batch_creator
Revises: 0600_replaced_answers
Create Date: 2026-12-02 01:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0700_batch_creator"
down_revision: str | Sequence[str] | None = "0600_replaced_answers"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Existing rows keep NULL: the lead polls them, as before.
    with op.batch_alter_table("batches") as batch:
        batch.add_column(sa.Column("created_by", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("batches") as batch:
        batch.drop_column("created_by")
