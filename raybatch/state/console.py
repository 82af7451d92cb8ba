"""The console's reads (keyset pages of jobs, documents and groups) and its users."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from raybatch.models import ConsoleRole, DocumentRecord, JobRecord, JobStatus
from raybatch.state.base import SqlBase, in_groups
from raybatch.state.port import ConsoleUser, DocumentQuery, FoundDocument, GroupCount, JobProgress
from raybatch.state.rows import STATUS, document_record, job_record
from raybatch.state.schema import console_users, groups
from raybatch.state.schema import documents as document_rows
from raybatch.state.schema import jobs as job_rows

MAX_PAGE = 500  # rows one page may ask for


def contains(column: sa.ColumnElement[str], text: str) -> sa.ColumnElement[bool]:
    """``column`` contains ``text`` (case-insensitive; ``%`` and ``_`` are literal)."""
    return column.ilike(f"%{like_literal(text)}%", escape="\\")


def like_literal(text: str) -> str:
    """``text`` for a LIKE pattern escaped with a backslash: its ``%`` and ``_`` are literal."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _keyset(query: sa.Select[Any], column: sa.Column[int], before: int | None, limit: int) -> sa.Select[Any]:
    """``query`` below ``before`` by ``column``, newest first, ``limit`` rows (at most MAX_PAGE)."""
    if before is not None:
        query = query.where(column < before)
    return query.order_by(column.desc()).limit(max(1, min(limit, MAX_PAGE)))


class ConsoleQueries(SqlBase):
    """The console part of ``SqlStateStore``: read-only pages, and the users table."""

    def page_jobs(
        self,
        statuses: Iterable[JobStatus] = (),
        *,
        search: str = "",
        before: int | None = None,
        limit: int = 50,
    ) -> list[JobRecord]:
        """Up to ``limit`` jobs with an id below ``before``, newest first (by the primary key)."""
        query = sa.select(job_rows)
        wanted = [JobStatus(s).value for s in statuses]
        if wanted:
            query = query.where(job_rows.c.status.in_(wanted))
        if search:
            query = query.where(contains(job_rows.c.source_name, search))
        with self._read() as conn:
            return [job_record(row) for row in conn.execute(_keyset(query, job_rows.c.id, before, limit))]

    def job_progress(self, job_ids: Iterable[int]) -> list[JobProgress]:
        """Status and progress of each of these jobs that exists, in id order."""
        columns = (job_rows.c.id, job_rows.c.status, job_rows.c.progress, job_rows.c.pages)
        found: list[JobProgress] = []
        with self._read() as conn:
            for ids in in_groups(sorted(set(job_ids))):
                rows = conn.execute(sa.select(*columns).where(job_rows.c.id.in_(ids)))
                found += [JobProgress(r.id, STATUS(r.status), float(r.progress), r.pages) for r in rows]
        return sorted(found, key=lambda p: p.id)

    def page_documents(
        self, query: DocumentQuery, *, before: int | None = None, limit: int = 50
    ) -> list[FoundDocument]:
        """Up to ``limit`` documents matching ``query`` with a row id below ``before``, newest first."""
        select = sa.select(document_rows).where(*_document_conditions(query))
        with self._read() as conn:
            rows = conn.execute(_keyset(select, document_rows.c.id, before, limit))
            return [FoundDocument(row.id, document_record(row)) for row in rows]

    def get_document(self, job_id: int, index: int) -> DocumentRecord:
        """One document of a job; KeyError when there is none."""
        query = sa.select(document_rows).where(
            document_rows.c.job_id == job_id, document_rows.c.doc_index == index
        )
        with self._read() as conn:
            row = conn.execute(query).first()
        if row is None:
            raise KeyError(f"no document {index} in job {job_id}")
        return document_record(row)

    def document_classes(self) -> list[str]:
        """The classes documents have, sorted."""
        query = sa.select(document_rows.c.doc_type).distinct().order_by(document_rows.c.doc_type)
        with self._read() as conn:
            return list(conn.execute(query).scalars())

    def page_groups(self, *, search: str = "", limit: int = 200) -> list[GroupCount]:
        """Up to ``limit`` groups (key or label containing ``search``) with their document counts."""
        counted = (
            sa.select(groups.c.key, groups.c.label, sa.func.count(document_rows.c.id).label("n"))
            .select_from(groups.outerjoin(document_rows, document_rows.c.group_key == groups.c.key))
            .group_by(groups.c.key, groups.c.label)
            .order_by(groups.c.key)
            .limit(max(1, min(limit, MAX_PAGE)))
        )
        if search:
            counted = counted.where(sa.or_(contains(groups.c.key, search), contains(groups.c.label, search)))
        with self._read() as conn:
            return [GroupCount(key, label, int(n)) for key, label, n in conn.execute(counted)]

    def put_console_user(self, name: str, role: ConsoleRole, password_hash: str) -> None:
        """Add a user, or replace the role and password hash of one."""
        insert = self._insert(console_users)
        changed = ("role", "password_hash", "updated_at")
        upsert = insert.on_conflict_do_update(
            index_elements=["name"], set_={column: insert.excluded[column] for column in changed}
        )
        with self._write() as conn:
            now = self._now()
            values = {"name": name, "role": ConsoleRole(role).value, "password_hash": password_hash}
            conn.execute(upsert.values(**values, created_at=now, updated_at=now))

    def get_console_user(self, name: str) -> ConsoleUser | None:
        """The user of this name, or None."""
        query = sa.select(console_users).where(console_users.c.name == name)
        with self._read() as conn:
            row = conn.execute(query).first()
        return None if row is None else ConsoleUser(row.name, ConsoleRole(row.role), row.password_hash)

    def list_console_users(self) -> list[ConsoleUser]:
        """Every user, by name."""
        query = sa.select(console_users).order_by(console_users.c.name)
        with self._read() as conn:
            return [ConsoleUser(r.name, ConsoleRole(r.role), r.password_hash) for r in conn.execute(query)]


def _document_conditions(query: DocumentQuery) -> list[sa.ColumnElement[bool]]:
    """The WHERE conditions of a documents search."""
    conditions: list[sa.ColumnElement[bool]] = []
    if query.doc_type:
        conditions.append(document_rows.c.doc_type == query.doc_type)
    if query.group_key:
        conditions.append(document_rows.c.group_key == query.group_key)
    if query.text:  # the whole of the values (any field of any classes file) and the other fields
        searched = (sa.cast(document_rows.c.field_values, sa.Text), sa.cast(document_rows.c.fields, sa.Text))
        # SQLite keeps JSON as text with non-ASCII escaped (\u0441...): the escaped spelling is sought too.
        spellings = {query.text, json.dumps(query.text)[1:-1]}
        conditions.append(sa.or_(*(contains(c, text) for c in searched for text in spellings)))
    date = document_rows.c.field_values["date"].as_string()
    if query.date_from:
        conditions.append(date >= query.date_from)
    if query.date_to:
        conditions.append(date <= query.date_to)
    return conditions
