"""Coordinators on one database: heartbeats, one lead, and their synchronous calls.

Several coordinators may share a database (two local runs each start their own Ray, a run with
other settings or code gets a coordinator of its own). Each one beats; the lead is a lease that one
of them holds at a time, taken by a conditional UPDATE, so only it sweeps and polls the batches no
live coordinator polls. The newest live coordinator leads (by ``started_at``, then id: one order,
so the lead never goes back and forth): an older one gives the lead up at its first beat after a
newer one beat, and takes it back only once that one stopped beating. The same table holds other
named leases (one compaction of the documents table at a time). A synchronous call's chunks carry
their coordinator's tag: the lead releases them only once that coordinator stopped beating.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa

from raybatch.models import SYNC_BATCH_ID, ChunkStatus, sync_tag
from raybatch.state.base import SqlBase
from raybatch.state.schema import chunks as chunk_rows
from raybatch.state.schema import coordinator_lead, coordinators

_LEAD = "lead"


class CoordinationQueries(SqlBase):
    """The coordinators part of ``SqlStateStore``."""

    def beat(self, coordinator_id: str, lease_seconds: float) -> bool:
        """Record this coordinator alive for ``lease_seconds``; True while it holds the lead. One
        that sees a newer live coordinator gives the lead up (False) and does not take it again."""
        with self._write() as conn:
            now = self._now()
            expires = now + timedelta(seconds=lease_seconds)
            insert = self._insert(coordinators).values(id=coordinator_id, started_at=now, expires_at=expires)
            conn.execute(insert.on_conflict_do_update(index_elements=["id"], set_={"expires_at": expires}))
            if self._newer_live(conn, coordinator_id, now):
                self._give_up(conn, _LEAD, coordinator_id)
                return False
            return self._take(conn, _LEAD, coordinator_id, expires)

    @staticmethod
    def _newer_live(conn: sa.Connection, coordinator_id: str, now: datetime) -> bool:
        """Whether a coordinator started after this one (ties: a greater id) beats within its lease."""
        started = sa.select(coordinators.c.started_at).where(coordinators.c.id == coordinator_id)
        mine = started.scalar_subquery()
        newer = sa.or_(
            coordinators.c.started_at > mine,
            sa.and_(coordinators.c.started_at == mine, coordinators.c.id > coordinator_id),
        )
        query = sa.select(coordinators.c.id).where(coordinators.c.expires_at > now, newer).limit(1)
        return conn.execute(query).first() is not None

    def take_lease(self, name: str, holder: str, lease_seconds: float) -> bool:
        """Take or renew the named lease for ``lease_seconds``; False while another holder has it."""
        with self._write() as conn:
            return self._take(conn, name, holder, self._now() + timedelta(seconds=lease_seconds))

    def give_up_lease(self, name: str, holder: str) -> None:
        """Let the named lease go, if ``holder`` has it."""
        with self._write() as conn:
            self._give_up(conn, name, holder)

    @staticmethod
    def _give_up(conn: sa.Connection, name: str, holder: str) -> None:
        held = sa.and_(coordinator_lead.c.name == name, coordinator_lead.c.holder == holder)
        conn.execute(sa.delete(coordinator_lead).where(held))

    def _take(self, conn: sa.Connection, name: str, holder: str, expires: datetime) -> bool:
        conn.execute(
            self._insert(coordinator_lead)
            .values(name=name, holder=holder, expires_at=expires)
            .on_conflict_do_nothing(index_elements=["name"])
        )
        free = sa.or_(coordinator_lead.c.holder == holder, coordinator_lead.c.expires_at <= self._now())
        take = (
            sa.update(coordinator_lead)
            .where(coordinator_lead.c.name == name, free)
            .values(holder=holder, expires_at=expires)
        )
        return conn.execute(take).rowcount == 1

    def retire(self, coordinator_id: str) -> None:
        """A coordinator that stops: its heartbeat and its lead are given up at once."""
        with self._write() as conn:
            conn.execute(sa.delete(coordinators).where(coordinators.c.id == coordinator_id))
            conn.execute(sa.delete(coordinator_lead).where(coordinator_lead.c.holder == coordinator_id))

    def live_coordinators(self) -> list[str]:
        """The coordinators that beat within their lease, oldest first."""
        query = (
            sa.select(coordinators.c.id)
            .where(coordinators.c.expires_at > self._now())
            .order_by(coordinators.c.started_at, coordinators.c.id)
        )
        with self._read() as conn:
            return list(conn.execute(query).scalars())

    def release_orphaned_sync_chunks(self) -> int:
        """Chunks of synchronous calls whose coordinator stopped beating go back to prepared."""
        live = [sync_tag(c) for c in self.live_coordinators()]
        tagged = sa.or_(
            chunk_rows.c.batch_id == SYNC_BATCH_ID, chunk_rows.c.batch_id.startswith(f"{SYNC_BATCH_ID}:")
        )
        where = [chunk_rows.c.status == ChunkStatus.SUBMITTED.value, tagged]
        if live:
            where.append(chunk_rows.c.batch_id.not_in(live))
        with self._write() as conn:
            values = {"status": ChunkStatus.PREPARED.value, "batch_id": None, "updated_at": self._now()}
            return int(conn.execute(sa.update(chunk_rows).where(*where).values(values)).rowcount)
