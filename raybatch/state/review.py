"""The corrections ledger and document versions: the review part of ``SqlStateStore``.

A correction is applied in one transaction, under the job's row lock: its idempotency key seen
before returns the earlier record and changes nothing; a touched document whose current version is
not the one the reviewer saw raises ``ReviewConflict`` and changes nothing; otherwise the touched
rows are copied to ``document_versions`` (their objects' keys with them), replaced by the new
versions, and the correction is one row of ``corrections``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from raybatch.errors import ReviewConflict
from raybatch.models import (
    REDO,
    REDO_FRESH,
    ChunkStatus,
    Correction,
    CorrectionRecord,
    DocumentRecord,
    DocumentVersion,
    JobStatus,
    ReviewState,
)
from raybatch.state.base import RELEASED_LEASE, SqlBase, in_groups
from raybatch.state.chunks import TOKENS, keep_usage
from raybatch.state.console import like_literal
from raybatch.state.rows import document_record, document_values
from raybatch.state.schema import chunks as chunk_rows
from raybatch.state.schema import corrections, document_versions
from raybatch.state.schema import documents as document_rows
from raybatch.state.schema import jobs as job_rows

REVIEWED = (ReviewState.ACCEPTED.value, ReviewState.CORRECTED.value)


class ReviewQueries(SqlBase):
    """Corrections, previous versions and review queues."""

    def record_correction(
        self,
        correction: Correction,
        expected: Mapping[int, int | None],
        documents: Sequence[DocumentRecord],
        removed: Sequence[int] = (),
    ) -> tuple[CorrectionRecord, bool]:
        """Apply a correction: ``documents`` become the current rows, ``removed`` indexes go, when
        every index in ``expected`` is at that version (None: no row). (record, applied)."""
        with self._write() as conn:
            conn.execute(sa.select(job_rows.c.id).where(job_rows.c.id == correction.job_id).with_for_update())
            earlier = self._correction_where(conn, corrections.c.idempotency_key == correction.key)
            if earlier:
                return earlier[0], False
            touched = sorted({*expected, *(d.index for d in documents), *removed})
            current = self._rows(conn, correction.job_id, touched)
            _check_versions(correction, expected, current)
            correction_id = self._insert_correction(conn, correction, documents, removed)
            self._archive(conn, current.values(), correction_id)
            self._replace(conn, correction.job_id, touched, documents)
            return self._correction_where(conn, corrections.c.id == correction_id)[0], True

    def redo_job(
        self,
        job_id: int,
        chunk_ns: Sequence[int],
        *,
        fresh: bool = False,
        pages: tuple[int, int] | None = None,
    ) -> bool:
        """A completed job goes back to pending with these chunks' answers cleared, to be asked
        again by the next run of its source (``fresh``: past the answer cache; ``pages``: the pages
        whose documents its writer replaces, None for all); False when the job is not completed.
        The cleared answers' usage moves to ``replaced_answers``: paid for, it stays counted."""
        region = f"pages {pages[0]}-{pages[1]}" if pages else None
        reopened = {**RELEASED_LEASE, "status": JobStatus.PENDING.value, "progress": 0.0, "attempts": 0}
        marks = {"error_class": REDO_FRESH if fresh else REDO, "error_message": region}
        cleared = {
            "status": ChunkStatus.FAILED.value,
            "answer": None,
            "error_class": REDO,
            **dict.fromkeys(TOKENS, 0),
        }
        completed = sa.and_(job_rows.c.id == job_id, job_rows.c.status == JobStatus.COMPLETED.value)
        chosen = sa.and_(chunk_rows.c.job_id == job_id, chunk_rows.c.n.in_(list(chunk_ns)))
        with self._write() as conn:
            now = self._now()
            job = sa.update(job_rows).where(completed).values({**reopened, **marks, "updated_at": now})
            if conn.execute(job).rowcount != 1:
                return False
            conn.execute(keep_usage(chosen, now))
            conn.execute(sa.update(chunk_rows).where(chosen).values({**cleared, "updated_at": now}))
            return True

    def get_correction(self, key: str) -> CorrectionRecord | None:
        """The correction applied under idempotency ``key``, if any."""
        with self._read() as conn:
            found = self._correction_where(conn, corrections.c.idempotency_key == key)
        return found[0] if found else None

    def list_corrections(self, job_id: int | None = None) -> list[CorrectionRecord]:
        """Applied corrections, oldest first, optionally of one job."""
        where = sa.true() if job_id is None else corrections.c.job_id == job_id
        with self._read() as conn:
            return self._correction_where(conn, where)

    def document_versions(self, job_id: int, index: int | None = None) -> list[DocumentVersion]:
        """A job's previous document versions, by index then version (optionally of one index)."""
        query = sa.select(document_versions).where(document_versions.c.job_id == job_id)
        if index is not None:
            query = query.where(document_versions.c.doc_index == index)
        query = query.order_by(document_versions.c.doc_index, document_versions.c.version)
        with self._read() as conn:
            return [_version(row) for row in conn.execute(query)]

    def versions_of(self, job_ids: Iterable[int]) -> dict[int, list[DocumentVersion]]:
        """``document_versions`` of each of these jobs, by job (a job with none: an empty list)."""
        found: dict[int, list[DocumentVersion]] = {job_id: [] for job_id in job_ids}
        order = (document_versions.c.job_id, document_versions.c.doc_index, document_versions.c.version)
        with self._read() as conn:
            for group in in_groups(sorted(found)):
                query = sa.select(document_versions).where(document_versions.c.job_id.in_(group))
                for row in conn.execute(query.order_by(*order)):
                    found[row.job_id].append(_version(row))
        return found

    def highest_versions(self, job_id: int) -> dict[int, int]:
        """The highest version each index of a job has had, current or previous."""
        found: dict[int, int] = {}
        with self._read() as conn:
            for table in (document_rows, document_versions):
                query = sa.select(table.c.doc_index, sa.func.max(table.c.version)).where(
                    table.c.job_id == job_id
                )
                for index, version in conn.execute(query.group_by(table.c.doc_index)):
                    found[index] = max(found.get(index, 0), int(version))
        return found

    def documents_in_review(
        self,
        states: Sequence[str],
        *,
        doc_type: str | None = None,
        reason: str | None = None,
        after: tuple[int, int] | None = None,
        before: tuple[int, int] | None = None,
        limit: int | None = None,
    ) -> list[DocumentRecord]:
        """Current documents whose review state is one of ``states`` (of class ``doc_type``, with a
        reason of code ``reason``), in (job, index) order after the (job, index) ``after``; with
        ``before``, those before it, the nearest first. At most ``limit`` (None: all)."""
        where = _in_review(states, doc_type, reason)
        key = (document_rows.c.job_id, document_rows.c.doc_index)
        if after is not None:
            where.append(_beyond(after, ascending=True))
        if before is not None:
            where.append(_beyond(before, ascending=False))
        order = [column.desc() for column in key] if before is not None else list(key)
        query = sa.select(document_rows).where(*where).order_by(*order).limit(limit)
        with self._read() as conn:
            return [document_record(row) for row in conn.execute(query)]

    def count_in_review(
        self,
        states: Sequence[str],
        *,
        doc_type: str | None = None,
        reason: str | None = None,
        after: tuple[int, int] | None = None,
    ) -> int:
        """How many documents ``documents_in_review`` would give (counted, none loaded)."""
        where = _in_review(states, doc_type, reason)
        if after is not None:
            where.append(_beyond(after, ascending=True))
        with self._read() as conn:
            return int(
                conn.execute(sa.select(sa.func.count()).select_from(document_rows).where(*where)).scalar_one()
            )

    def review_totals(self, job_ids: Sequence[int] | None = None) -> dict[str, int]:
        """Current documents by review state (every state, zeros included), of ``job_ids`` or all."""
        query = sa.select(document_rows.c.review, sa.func.count()).group_by(document_rows.c.review)
        totals = dict.fromkeys((state.value for state in ReviewState), 0)
        with self._read() as conn:
            for ids in [None] if job_ids is None else in_groups(list(job_ids)):
                where = query if ids is None else query.where(document_rows.c.job_id.in_(ids))
                for state, count in conn.execute(where):
                    totals[state] = totals.get(state, 0) + int(count)
        return totals

    def review_totals_by_job(self, job_ids: Sequence[int]) -> dict[int, dict[str, int]]:
        """Each of ``job_ids``' current documents by review state (zeros included; a job with no
        document: none)."""
        query = sa.select(document_rows.c.job_id, document_rows.c.review, sa.func.count()).group_by(
            document_rows.c.job_id, document_rows.c.review
        )
        found: dict[int, dict[str, int]] = {}
        with self._read() as conn:
            for ids in in_groups(list(job_ids)):
                for job_id, state, count in conn.execute(query.where(document_rows.c.job_id.in_(ids))):
                    totals = found.setdefault(int(job_id), dict.fromkeys((s.value for s in ReviewState), 0))
                    totals[state] = totals.get(state, 0) + int(count)
        return found

    def reviewed_layout(self, sha256: str) -> list[DocumentRecord]:
        """The current documents of the newest job of this source that has a reviewed document
        (empty when none has): what a rerun or ``--force`` keeps instead of a model's answer."""
        query = (
            sa.select(document_rows.c.job_id)
            .join(job_rows, job_rows.c.id == document_rows.c.job_id)
            .where(job_rows.c.sha256 == sha256, document_rows.c.review.in_(REVIEWED))
            .order_by(document_rows.c.job_id.desc())
            .limit(1)
        )
        with self._read() as conn:
            job_id = conn.execute(query).scalar()
            if job_id is None:
                return []
            rows = sa.select(document_rows).where(document_rows.c.job_id == job_id)
            return [document_record(row) for row in conn.execute(rows.order_by(document_rows.c.doc_index))]

    def reviewed_layouts(self, sha256s: Iterable[str]) -> dict[str, list[DocumentRecord]]:
        """``reviewed_layout`` of each of these sources, by sha256, in two statements (per 1,000)."""
        found: dict[str, list[DocumentRecord]] = {sha: [] for sha in sha256s}
        with self._read() as conn:
            for group in in_groups(sorted(found)):
                newest = (
                    sa.select(job_rows.c.sha256, sa.func.max(document_rows.c.job_id))
                    .join(job_rows, job_rows.c.id == document_rows.c.job_id)
                    .where(job_rows.c.sha256.in_(group), document_rows.c.review.in_(REVIEWED))
                    .group_by(job_rows.c.sha256)
                )
                source_of = {int(job_id): sha for sha, job_id in conn.execute(newest)}
                if not source_of:
                    continue
                rows = sa.select(document_rows).where(document_rows.c.job_id.in_(list(source_of)))
                order = (document_rows.c.job_id, document_rows.c.doc_index)
                for row in conn.execute(rows.order_by(*order)):
                    found[source_of[row.job_id]].append(document_record(row))
        return found

    def _rows(self, conn: Connection, job_id: int, indexes: Sequence[int]) -> dict[int, DocumentRecord]:
        query = sa.select(document_rows).where(
            document_rows.c.job_id == job_id, document_rows.c.doc_index.in_(list(indexes))
        )
        return {row.doc_index: document_record(row) for row in conn.execute(query)}

    def _insert_correction(
        self,
        conn: Connection,
        correction: Correction,
        documents: Sequence[DocumentRecord],
        removed: Sequence[int],
    ) -> int:
        result = {"written": [[d.index, d.version] for d in documents], "removed": list(removed)}
        values = {
            "idempotency_key": correction.key,
            "job_id": correction.job_id,
            "doc_index": correction.index,
            "base_version": correction.base_version,
            "kind": correction.kind,
            "reviewer": correction.reviewer,
            "change": dict(correction.change),
            "result": result,
            "created_at": self._now(),
        }
        inserted = conn.execute(sa.insert(corrections).values(values)).inserted_primary_key
        return int(inserted[0]) if inserted else 0

    def _archive(self, conn: Connection, rows: Any, correction_id: int) -> None:
        now = self._now()
        archived = [
            {
                "job_id": doc.job_id,
                "doc_index": doc.index,
                "version": doc.version,
                "record": {"job_id": doc.job_id, "index": doc.index, **document_values(doc)},
                "pdf_key": doc.pdf_key,
                "thumb_key": doc.thumb_key,
                "replaced_by": correction_id,
                "created_at": now,
            }
            for doc in rows
        ]
        if archived:
            conn.execute(sa.insert(document_versions), archived)

    def _replace(
        self, conn: Connection, job_id: int, touched: Sequence[int], documents: Sequence[DocumentRecord]
    ) -> None:
        conn.execute(
            sa.delete(document_rows).where(
                document_rows.c.job_id == job_id, document_rows.c.doc_index.in_(list(touched))
            )
        )
        now = self._now()
        rows = [
            {
                **document_values(d),
                "job_id": job_id,
                "doc_index": d.index,
                "created_at": now,
                "updated_at": now,
            }
            for d in documents
        ]
        if rows:
            conn.execute(sa.insert(document_rows), rows)

    def _correction_where(self, conn: Connection, where: Any) -> list[CorrectionRecord]:
        query = sa.select(corrections).where(where).order_by(corrections.c.id)
        return [_correction(row) for row in conn.execute(query)]


def _in_review(
    states: Sequence[str], doc_type: str | None, reason: str | None
) -> list[sa.ColumnElement[bool]]:
    """Documents in one of ``states``, of a class and with a reason code when given. A reason is
    ``code: detail`` (``review.confidence.reason_code``): in the JSON list, an item starting ``"code:``."""
    where: list[sa.ColumnElement[bool]] = [document_rows.c.review.in_(list(states))]
    if doc_type is not None:
        where.append(document_rows.c.doc_type == doc_type)
    if reason is not None:
        reasons = sa.func.lower(sa.cast(document_rows.c.review_reasons, sa.Text))
        where.append(reasons.like(f'%"{like_literal(reason.strip().lower())}:%', escape="\\"))
    return where


def _beyond(position: tuple[int, int], *, ascending: bool) -> sa.ColumnElement[bool]:
    """Documents after (or before) the (job, index) ``position`` in (job, index) order."""
    job, index = document_rows.c.job_id, document_rows.c.doc_index
    if ascending:
        return sa.or_(job > position[0], sa.and_(job == position[0], index > position[1]))
    return sa.or_(job < position[0], sa.and_(job == position[0], index < position[1]))


def _check_versions(
    correction: Correction, expected: Mapping[int, int | None], current: Mapping[int, DocumentRecord]
) -> None:
    for index, version in sorted(expected.items()):
        found = current[index].version if index in current else None
        if found != version:
            raise ReviewConflict(
                f"document {correction.job_id}:{index} is at version {found}, not {version}: "
                "someone corrected it meanwhile; look at it again and redo your change"
            )


def _correction(row: Any) -> CorrectionRecord:
    result = row.result or {}
    return CorrectionRecord(
        job_id=row.job_id,
        index=row.doc_index,
        base_version=row.base_version,
        kind=row.kind,
        reviewer=row.reviewer,
        change=dict(row.change),
        key=row.idempotency_key,
        id=row.id,
        created_at=row.created_at,
        written=tuple((int(i), int(v)) for i, v in result.get("written", [])),
        removed=tuple(int(i) for i in result.get("removed", [])),
    )


def _version(row: Any) -> DocumentVersion:
    values = dict(row.record)
    if "field_values" in values:  # stored under the row's column names
        values["values"] = values.pop("field_values")
    values["problems"] = tuple(tuple(problem) for problem in values.get("problems") or ())
    record = DocumentRecord(**values)
    return DocumentVersion(row.job_id, row.doc_index, row.version, record, row.replaced_by)
