"""``SqlStateStore``: the state store on SQLAlchemy 2 Core, for a SQLite file or PostgreSQL.

Its parts live beside it, one module per concern: ``jobs`` (registration, transitions, leases),
``chunks`` (requests and their results), ``batches`` (intents and Message Batches) and ``catalog``
(documents, groups, OCR cache, errors, pause flag); ``console`` the web console's reads and users.
``base`` holds the engine, clock and transactions; ``engine`` the SQLite tuning and error
translation; ``schema`` the tables.
"""

from __future__ import annotations

from raybatch.state.batches import BatchQueries
from raybatch.state.catalog import CatalogQueries
from raybatch.state.chunks import ChunkQueries
from raybatch.state.console import ConsoleQueries
from raybatch.state.coordination import CoordinationQueries
from raybatch.state.jobs import JobQueries
from raybatch.state.review import ReviewQueries


class SqlStateStore(
    JobQueries, ChunkQueries, BatchQueries, CatalogQueries, CoordinationQueries, ConsoleQueries, ReviewQueries
):
    """The state store on a SQLAlchemy URL; picklable (rebuilt from its URL in each process)."""
