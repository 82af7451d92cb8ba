"""Documents keep the key of their text object (``<n>.txt`` beside the PDF).

Revision ID: 0300_text_key
Revises: 0100_classes
Create Date: 2026-12-01 22:15:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0300_text_key"
down_revision: str | Sequence[str] | None = "0100_classes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        batch.add_column(sa.Column("text_key", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        batch.drop_column("text_key")
