"""The workload budget: named holders lease cost units out of a shared capacity.

Each lease is one row with an expiry; the units in use are the sum over rows not yet expired, so a
holder that dies gives its units back when its lease runs out, with nobody's help (expired rows are
deleted lazily, by the next take). Taking, renewing and giving back are one statement each:

    take       INSERT ... SELECT ... WHERE (units of live leases) + :units <= :capacity
    renew      UPDATE ... SET expires_at = ... WHERE lease_id = :id AND expires_at > now
    give back  DELETE ... WHERE lease_id = :id                           (idempotent)

The take must see every take committed before it. SQLite's ``BEGIN IMMEDIATE`` serialises write
transactions; on PostgreSQL, whose READ COMMITTED snapshot is taken per statement, the take first
waits for a transaction-scoped advisory lock, so its INSERT's snapshot includes the takes that held
the lock before it (they commit before the lock is released).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import sqlalchemy as sa

from raybatch.state.base import SqlBase
from raybatch.state.schema import workload

_PG_TAKE_LOCK = 0x7261796277726B6C  # "raybwrkl": queues concurrent takes on PostgreSQL


@dataclass(frozen=True)
class WorkloadLease:
    """Units a holder has taken, until ``expires_at`` unless renewed."""

    lease_id: str
    holder: str
    units: int
    elastic: bool
    taken_at: datetime
    expires_at: datetime


class WorkloadStore(Protocol):
    """Leases on the units of the workload budget."""

    def take_units(
        self,
        *,
        lease_id: str,
        holder: str,
        units: int,
        capacity: int,
        ttl_seconds: float,
        elastic: bool = False,
    ) -> WorkloadLease | None:
        """Take ``units`` if they fit in ``capacity`` beside every live lease; None if they do not.
        Taking a lease id that is still live returns that lease."""
        ...

    def renew_units(
        self, lease_id: str, ttl_seconds: float, *, units: int | None = None
    ) -> WorkloadLease | None:
        """Extend a live lease to now + ``ttl_seconds`` (and lower its units to ``units``, never raise
        them); None when it has expired or was given back (its units may be someone else's now)."""
        ...

    def give_back_units(self, lease_id: str) -> None:
        """Free a lease's units; giving back twice, or after expiry, does nothing."""
        ...

    def live_leases(self) -> list[WorkloadLease]:
        """The leases not yet expired, oldest first."""
        ...


def _lease(row: Any) -> WorkloadLease:
    return WorkloadLease(
        lease_id=row.lease_id,
        holder=row.holder,
        units=row.units,
        elastic=bool(row.elastic),
        taken_at=row.taken_at,
        expires_at=row.expires_at,
    )


class SqlWorkloadStore(SqlBase):
    """The workload budget in the state database (SQLite file or PostgreSQL)."""

    def take_units(
        self,
        *,
        lease_id: str,
        holder: str,
        units: int,
        capacity: int,
        ttl_seconds: float,
        elastic: bool = False,
    ) -> WorkloadLease | None:
        """Take ``units`` if they fit in ``capacity`` beside every live lease; None if they do not.
        Taking a lease id that is still live returns that lease."""
        if units < 1:
            raise ValueError("a lease takes at least one unit")
        with self._write() as conn:
            if self._dialect == "postgresql":
                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_PG_TAKE_LOCK)))
            now = self._now()
            # Rows left out of the sum below are removed in the same transaction, so a late renewal
            # cannot bring back units that this take already counted as free.
            conn.execute(sa.delete(workload).where(workload.c.expires_at <= now))
            in_use = sa.select(sa.func.coalesce(sa.func.sum(workload.c.units), 0)).scalar_subquery()
            values = {
                "lease_id": lease_id,
                "holder": holder,
                "units": units,
                "elastic": elastic,
                "taken_at": now,
                "expires_at": now + timedelta(seconds=ttl_seconds),
            }
            row = sa.select(
                *(sa.literal(value, workload.c[name].type).label(name) for name, value in values.items())
            ).where(in_use + units <= capacity)
            insert = self._insert(workload).from_select(list(values), row)
            conn.execute(insert.on_conflict_do_nothing(index_elements=["lease_id"]))
            found = conn.execute(sa.select(workload).where(workload.c.lease_id == lease_id)).first()
        return None if found is None else _lease(found)

    def renew_units(
        self, lease_id: str, ttl_seconds: float, *, units: int | None = None
    ) -> WorkloadLease | None:
        """Extend a live lease to now + ``ttl_seconds`` (and lower its units to ``units``, never raise
        them); None when it has expired or was given back (its units may be someone else's now)."""
        with self._write() as conn:
            now = self._now()
            changes: dict[str, Any] = {"expires_at": now + timedelta(seconds=ttl_seconds)}
            if units is not None:
                changes["units"] = sa.case((workload.c.units > units, units), else_=workload.c.units)
            update = (
                sa.update(workload)
                .where(workload.c.lease_id == lease_id, workload.c.expires_at > now)
                .values(**changes)
                .returning(*workload.c)
            )
            row = conn.execute(update).first()
        return None if row is None else _lease(row)

    def give_back_units(self, lease_id: str) -> None:
        """Free a lease's units; giving back twice, or after expiry, does nothing."""
        with self._write() as conn:
            conn.execute(sa.delete(workload).where(workload.c.lease_id == lease_id))

    def live_leases(self) -> list[WorkloadLease]:
        """The leases not yet expired, oldest first."""
        query = (
            sa.select(workload)
            .where(workload.c.expires_at > self._now())
            .order_by(workload.c.taken_at, workload.c.lease_id)
        )
        with self._read() as conn:
            return [_lease(row) for row in conn.execute(query)]
