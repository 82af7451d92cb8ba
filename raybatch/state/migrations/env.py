"""Alembic environment: always run programmatically by ``raybatch.state.migrate`` on a connection
it opened (``config.attributes["connection"]``), inside that connection's transaction."""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext

from raybatch.state.schema import UtcDateTime, metadata


def _render_item(kind: str, obj: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    # Scripts stay frozen: they spell the stored type, not our runtime decorator.
    if kind == "type" and isinstance(obj, UtcDateTime):
        return "sa.DateTime(timezone=True)"
    return False


connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    render_item=_render_item,
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
