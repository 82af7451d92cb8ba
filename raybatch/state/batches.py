"""Message Batches: the intent recorded before the create call, then the batch as Anthropic knows it.

A crash between ``record_batch_intent`` and ``attach_batch`` leaves a CREATING row that names its
requests: the coordinator reconciles it against Anthropic's list and attaches or marks it lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from raybatch.errors import PermanentError
from raybatch.models import BatchStatus, ChunkStatus
from raybatch.state.base import SqlBase
from raybatch.state.chunks import ACTIVE_BATCH_STATUSES, SUBMITTABLE
from raybatch.state.port import BatchRecord
from raybatch.state.rows import batch_record
from raybatch.state.schema import UtcDateTime, batch_requests, batches, chunks


class BatchQueries(SqlBase):
    """The batches part of ``SqlStateStore``."""

    def record_batch_intent(self, custom_ids: Sequence[str], request_bytes: int) -> int:
        """Record, before creating it, a batch of these requests; returns the intent's id."""
        unique_ids = list(dict.fromkeys(custom_ids))
        with self._write() as conn:
            now = self._now()
            intent_id = conn.execute(
                sa.insert(batches)
                .values(
                    status=BatchStatus.CREATING.value,
                    request_count=len(unique_ids),
                    request_bytes=request_bytes,
                    created_at=now,
                    updated_at=now,
                )
                .returning(batches.c.id)
            ).scalar_one()
            if unique_ids:
                rows = [{"batch_id": intent_id, "custom_id": cid} for cid in unique_ids]
                conn.execute(sa.insert(batch_requests), rows)
        return int(intent_id)

    def attach_batch(self, intent_id: int, anthropic_id: str, status: BatchStatus, raw: str) -> None:
        """The intent was created as ``anthropic_id``: record it and mark its prepared or retrying
        chunks submitted in it, in one transaction. Repeating it with the same id is harmless."""
        attach = (
            sa.update(batches)
            .where(
                batches.c.id == intent_id,
                sa.or_(batches.c.anthropic_id.is_(None), batches.c.anthropic_id == anthropic_id),
            )
            .values(anthropic_id=anthropic_id, status=BatchStatus(status).value, raw=raw)
        )
        members = sa.select(batch_requests.c.custom_id).where(batch_requests.c.batch_id == intent_id)
        with self._write() as conn:
            now = self._now()
            if conn.execute(attach.values(updated_at=now)).rowcount != 1:
                raise PermanentError(f"batch intent {intent_id} is unknown or attached to another batch")
            conn.execute(
                sa.update(chunks)
                .where(chunks.c.custom_id.in_(members), chunks.c.status.in_(SUBMITTABLE))
                .values(status=ChunkStatus.SUBMITTED.value, batch_id=anthropic_id, updated_at=now)
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
