"""Message Batches: the intent recorded before the create call, then the batch as Anthropic knows it.

A crash between ``record_batch_intent`` and ``attach_batch`` leaves a CREATING row that names its
requests: the coordinator reconciles it against Anthropic's list and attaches or marks it lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection

from raybatch.errors import IntentConflict, PermanentError
from raybatch.models import BatchStatus, ChunkStatus
from raybatch.state.base import SqlBase, in_groups
from raybatch.state.chunks import ACTIVE_BATCH_STATUSES, SUBMITTABLE
from raybatch.state.port import BatchRecord
from raybatch.state.rows import batch_record
from raybatch.state.schema import UtcDateTime, batch_requests, batches, chunks


class BatchQueries(SqlBase):
    """The batches part of ``SqlStateStore``."""

    def record_batch_intent(
        self, custom_ids: Sequence[str], request_bytes: int, created_by: str | None = None
    ) -> int:
        """Record, before creating it, a batch of these requests by coordinator ``created_by``;
        returns the intent's id.

        IntentConflict when one of them is no longer waiting to be sent (in another batch, or held
        by another intent still CREATING: the unique ``creating`` column makes that a database rule,
        so two coordinators racing on one request cannot both record it)."""
        unique_ids = list(dict.fromkeys(custom_ids))
        with self._write() as conn:
            taken = self._taken(conn, unique_ids)
            if taken:
                raise IntentConflict(f"{len(taken)} requests are in another batch already, {taken[0]} first")
            now = self._now()
            intent_id = conn.execute(
                sa.insert(batches)
                .values(
                    status=BatchStatus.CREATING.value,
                    request_count=len(unique_ids),
                    request_bytes=request_bytes,
                    created_by=created_by,
                    created_at=now,
                    updated_at=now,
                )
                .returning(batches.c.id)
            ).scalar_one()
            if unique_ids:
                rows = [{"batch_id": intent_id, "custom_id": cid, "creating": cid} for cid in unique_ids]
                try:
                    conn.execute(sa.insert(batch_requests), rows)
                except sa_exc.IntegrityError as exc:  # another intent recorded one of them meanwhile
                    raise IntentConflict("a request is held by another batch intent") from exc
        return int(intent_id)

    @staticmethod
    def _taken(conn: Connection, custom_ids: list[str]) -> list[str]:
        """Those of these requests held by an intent still CREATING, or whose chunk is no longer
        waiting to be sent."""
        taken: set[str] = set()
        for group in in_groups(custom_ids):
            held = sa.select(batch_requests.c.creating).where(batch_requests.c.creating.in_(group))
            gone = sa.select(chunks.c.custom_id).where(
                chunks.c.custom_id.in_(group), chunks.c.status.not_in(SUBMITTABLE)
            )
            taken.update(conn.scalars(held))
            taken.update(conn.scalars(gone))
        return sorted(taken)

    def attach_batch(
        self, intent_id: int, anthropic_id: str, status: BatchStatus, raw: str, *, adopted: bool = False
    ) -> bool:
        """``BatchStates.attach_batch``: one transaction. An ``adopted`` batch (found by listing)
        that another intent holds is not taken (False); our own create's batch that another intent
        adopted is taken back from it, and that intent is reconciled again."""
        with self._write() as conn:
            now = self._now()
            holder = conn.execute(
                sa.select(batches.c.id, batches.c.adopted).where(
                    batches.c.anthropic_id == anthropic_id, batches.c.id != intent_id
                )
            ).first()
            if holder is not None:
                if adopted:
                    return False
                if not holder.adopted:
                    raise PermanentError(f"batch {anthropic_id} is recorded for another intent already")
                self._disown(conn, holder.id, anthropic_id, now)
            attach = (
                sa.update(batches)
                .where(
                    batches.c.id == intent_id,
                    sa.or_(batches.c.anthropic_id.is_(None), batches.c.anthropic_id == anthropic_id),
                )
                .values(anthropic_id=anthropic_id, status=BatchStatus(status).value, raw=raw, adopted=adopted)
            )
            if conn.execute(attach.values(updated_at=now)).rowcount != 1:
                raise PermanentError(f"batch intent {intent_id} is unknown or attached to another batch")
            self._submit_members(conn, intent_id, anthropic_id, now)
        return True

    @staticmethod
    def _submit_members(conn: Connection, intent_id: int, anthropic_id: str, now: datetime) -> None:
        """The intent's requests are in ``anthropic_id`` now; IntentConflict (nothing changed) when
        one of them is in another batch: the database never holds one request in two."""
        members = sa.select(batch_requests.c.custom_id).where(batch_requests.c.batch_id == intent_id)
        elsewhere = conn.execute(
            sa.select(chunks.c.custom_id)
            .where(
                chunks.c.custom_id.in_(members),
                chunks.c.status == ChunkStatus.SUBMITTED.value,
                chunks.c.batch_id != anthropic_id,
            )
            .limit(1)
        ).scalar()
        if elsewhere is not None:
            raise IntentConflict(f"batch {anthropic_id}: request {elsewhere} is in another batch already")
        conn.execute(
            sa.update(chunks)
            .where(chunks.c.custom_id.in_(members), chunks.c.status.in_(SUBMITTABLE))
            .values(status=ChunkStatus.SUBMITTED.value, batch_id=anthropic_id, updated_at=now)
        )
        conn.execute(
            sa.update(batch_requests).where(batch_requests.c.batch_id == intent_id).values(creating=None)
        )

    @staticmethod
    def _disown(conn: Connection, intent_id: int, anthropic_id: str, now: datetime) -> None:
        """An intent that adopted another's batch gives it up: CREATING again (to be reconciled
        anew), its requests back to prepared, held by it again."""
        members = sa.select(batch_requests.c.custom_id).where(batch_requests.c.batch_id == intent_id)
        conn.execute(
            sa.update(chunks)
            .where(
                chunks.c.custom_id.in_(members),
                chunks.c.status == ChunkStatus.SUBMITTED.value,
                chunks.c.batch_id == anthropic_id,
            )
            .values(status=ChunkStatus.PREPARED.value, batch_id=None, updated_at=now)
        )
        conn.execute(
            sa.update(batches)
            .where(batches.c.id == intent_id)
            .values(anthropic_id=None, status=BatchStatus.CREATING.value, adopted=False, raw=None)
            .values(updated_at=now)
        )
        conn.execute(
            sa.update(batch_requests)
            .where(batch_requests.c.batch_id == intent_id)
            .values(creating=batch_requests.c.custom_id)
        )

    def mark_batch_lost(self, intent_id: int) -> int:
        """The batch will bring no (more) results: mark it lost and send its chunks still waiting
        in it to RETRY. Returns how many chunks were released."""
        with self._write() as conn:
            now = self._now()
            anthropic_id = conn.execute(
                sa.update(batches)
                .where(batches.c.id == intent_id)
                .values(
                    status=BatchStatus.LOST.value,
                    ended_at=sa.func.coalesce(batches.c.ended_at, sa.literal(now, UtcDateTime())),
                    updated_at=now,
                )
                .returning(batches.c.anthropic_id)
            ).scalar_one_or_none()
            conn.execute(
                sa.update(batch_requests).where(batch_requests.c.batch_id == intent_id).values(creating=None)
            )
            if anthropic_id is None:
                return 0
            release = (
                sa.update(chunks)
                .where(chunks.c.batch_id == anthropic_id, chunks.c.status == ChunkStatus.SUBMITTED.value)
                .values(status=ChunkStatus.RETRY.value, updated_at=now)
            )
            return int(conn.execute(release).rowcount)

    def get_batch(self, intent_id: int) -> BatchRecord:
        """One batch by our id; KeyError when there is none."""
        with self._read() as conn:
            row = conn.execute(sa.select(batches).where(batches.c.id == intent_id)).first()
        if row is None:
            raise KeyError(f"no batch {intent_id}")
        return batch_record(row)

    def active_batches(self) -> list[BatchRecord]:
        """Batches still in flight (creating, in progress, canceling, unknown), oldest first."""
        query = (
            sa.select(batches)
            .where(batches.c.status.in_([s.value for s in ACTIVE_BATCH_STATUSES]))
            .order_by(batches.c.id)
        )
        with self._read() as conn:
            return [batch_record(row) for row in conn.execute(query)]

    def batch_chunks(self, intent_id: int) -> list[str]:
        """The custom_ids a batch (or its intent) carries, sorted."""
        query = (
            sa.select(batch_requests.c.custom_id)
            .where(batch_requests.c.batch_id == intent_id)
            .order_by(batch_requests.c.custom_id)
        )
        with self._read() as conn:
            return list(conn.execute(query).scalars())

    def batch_jobs(self, intent_id: int) -> list[int]:
        """The jobs with chunks in a batch, sorted."""
        query = (
            sa.select(chunks.c.job_id)
            .join(batch_requests, batch_requests.c.custom_id == chunks.c.custom_id)
            .where(batch_requests.c.batch_id == intent_id)
            .distinct()
            .order_by(chunks.c.job_id)
        )
        with self._read() as conn:
            return list(conn.execute(query).scalars())

    def intent_chunk_ids(self) -> set[str]:
        """custom_ids held by batch intents not yet created or reconciled: not to be sent again."""
        query = (
            sa.select(batch_requests.c.custom_id)
            .join(batches, batches.c.id == batch_requests.c.batch_id)
            .where(batches.c.status == BatchStatus.CREATING.value)
        )
        with self._read() as conn:
            return set(conn.execute(query).scalars())

    def known_batch_ids(self) -> set[str]:
        """Every Anthropic batch id this database has recorded (to tell our batches from new ones)."""
        query = sa.select(batches.c.anthropic_id).where(batches.c.anthropic_id.is_not(None))
        with self._read() as conn:
            return set(conn.execute(query).scalars())

    def update_batch(
        self, anthropic_id: str, status: BatchStatus, counts: Mapping[str, int], raw: str
    ) -> bool:
        """Record a batch's latest state (``ended_at`` set once it ends); False for an unknown id."""
        with self._write() as conn:
            now = self._now()
            values: dict[str, Any] = {
                "status": BatchStatus(status).value,
                "counts": dict(counts),
                "raw": raw,
                "updated_at": now,
            }
            if BatchStatus(status) is BatchStatus.ENDED:
                values["ended_at"] = sa.func.coalesce(batches.c.ended_at, sa.literal(now, UtcDateTime()))
            update = sa.update(batches).where(batches.c.anthropic_id == anthropic_id).values(values)
            return conn.execute(update).rowcount == 1
