"""Chunks (one Claude request each): upserts that keep answers, idempotent result filing, and the
totals of what the answers cost (``paid_answers``: the chunks' own and those a redo replaced)."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from raybatch.cost import add_usage
from raybatch.models import (
    BatchStatus,
    ChunkRecord,
    ChunkStatus,
    JobStatus,
    Lease,
    ProcessingMode,
    ResultType,
    Usage,
    sent_mode_of,
)
from raybatch.state.base import RELEASED_LEASE, SqlBase, clip, held_by_all, held_values, in_groups, insert_on
from raybatch.state.port import ChunkProgress, ChunkResult, RequestTotals
from raybatch.state.rows import CHUNK_COLUMNS, chunk_record, chunk_values
from raybatch.state.schema import batches as batch_rows
from raybatch.state.schema import chunks as chunk_rows
from raybatch.state.schema import jobs as job_rows
from raybatch.state.schema import replaced_answers

TOKENS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")
SUBMITTABLE = (ChunkStatus.PREPARED.value, ChunkStatus.RETRY.value)
ACTIVE_BATCH_STATUSES = (
    BatchStatus.CREATING,
    BatchStatus.IN_PROGRESS,
    BatchStatus.CANCELING,
    BatchStatus.UNKNOWN,
)


def _result_values(
    batch_id: str,
    result: ResultType,
    answer: str | None,
    usage: Usage | None,
    error: tuple[str | None, str | None],
    retry: bool,
    max_attempts: int,
) -> dict[str, Any]:
    """The columns a filed result sets; attempts and the retry budget are computed in SQL."""
    if ResultType(result) is ResultType.SUCCEEDED:
        if answer is None:
            raise ValueError("a succeeded result needs its answer")
        tokens = {name: getattr(usage or Usage(), name) for name in TOKENS}
        return {
            **tokens,
            "sent_mode": sent_mode_of(batch_id).value,
            "status": ChunkStatus.SUCCEEDED.value,
            "answer": answer,
            "error_class": None,
            "error_message": None,
        }
    attempts = chunk_rows.c.attempts + 1
    failed, retried = ChunkStatus.FAILED.value, ChunkStatus.RETRY.value
    status = sa.case((attempts >= max_attempts, failed), else_=retried) if retry else failed
    error_class, error_message = error
    return {
        "status": status,
        "attempts": attempts,
        "error_class": error_class or ResultType(result).value,
        "error_message": None if error_message is None else clip(error_message),
    }


def keep_usage(chosen: sa.ColumnElement[bool], now: datetime) -> sa.Insert:
    """Copy the usage of the ``chosen`` chunks' answers that brought tokens to ``replaced_answers``:
    what is about to clear or overwrite a paid answer keeps it counted first."""
    c = chunk_rows.c
    kept = ("job_id", "n", "custom_id", "sent_mode", "sent_at", *TOKENS, "emulated")
    paid = sa.or_(*(c[name] > 0 for name in TOKENS))
    stamp = sa.literal(now, replaced_answers.c.created_at.type).label("created_at")
    rows = sa.select(*(c[name] for name in kept), stamp).where(chosen, paid)
    return sa.insert(replaced_answers).from_select([*kept, "created_at"], rows)


def unusable_usage(custom_id: str, batch_id: str, usage: Usage, now: datetime) -> sa.Insert:
    """The usage of an answer paid for and not kept (cut at max_tokens, unparseable), as a
    ``replaced_answers`` row of its chunk: the chunk is asked again, and both answers count."""
    c = chunk_rows.c
    literal = {name: sa.literal(getattr(usage, name), sa.BigInteger).label(name) for name in TOKENS}
    mode = sa.literal(sent_mode_of(batch_id).value, sa.String).label("sent_mode")
    stamp = sa.literal(now, replaced_answers.c.created_at.type).label("created_at")
    columns = [c.job_id, c.n, c.custom_id, mode, c.sent_at, *literal.values(), c.emulated, stamp]
    rows = sa.select(*columns).where(c.custom_id == custom_id)
    names = ["job_id", "n", "custom_id", "sent_mode", "sent_at", *TOKENS, "emulated", "created_at"]
    return sa.insert(replaced_answers).from_select(names, rows)


def _still_submitted() -> sa.ColumnElement[bool]:
    """The chunk a bound row of a bulk filing names: still SUBMITTED under its batch or tag."""
    c = chunk_rows.c
    return sa.and_(
        c.custom_id == sa.bindparam("b_cid"),
        c.batch_id == sa.bindparam("b_batch"),
        c.status == ChunkStatus.SUBMITTED.value,
    )


@functools.cache
def _file_answers() -> sa.Update:
    """Files answers, one bound row a chunk (built once): what ``_result_values`` sets for one."""
    tokens: dict[str, Any] = {name: sa.bindparam(f"b_{name}") for name in TOKENS}
    values = {
        **tokens,
        "sent_mode": sa.bindparam("b_mode"),
        "status": ChunkStatus.SUCCEEDED.value,
        "answer": sa.bindparam("b_answer"),
        "error_class": None,
        "error_message": None,
        "updated_at": sa.bindparam("b_now", type_=chunk_rows.c.updated_at.type),
    }
    return sa.update(chunk_rows).where(_still_submitted()).values(values)


@functools.lru_cache(maxsize=16)
def _file_errors(retry: bool, max_attempts: int) -> sa.Update:
    """Files errors, one bound row a chunk (built once per kind): a try counted; with ``retry``
    RETRY until ``max_attempts`` tries failed, else FAILED."""
    attempts = chunk_rows.c.attempts + 1
    failed, retried = ChunkStatus.FAILED.value, ChunkStatus.RETRY.value
    status = sa.case((attempts >= max_attempts, failed), else_=retried) if retry else failed
    values = {
        "status": status,
        "attempts": attempts,
        "error_class": sa.bindparam("b_error_class"),
        "error_message": sa.bindparam("b_error_message"),
        "updated_at": sa.bindparam("b_now", type_=chunk_rows.c.updated_at.type),
    }
    return sa.update(chunk_rows).where(_still_submitted()).values(values)


@functools.cache
def _keep_unusable() -> sa.Insert:
    """``unusable_usage`` with its values bound, one row a chunk (built once)."""
    c = chunk_rows.c
    literal = {name: sa.bindparam(f"b_{name}", type_=sa.BigInteger).label(name) for name in TOKENS}
    mode = sa.bindparam("b_mode", type_=sa.String).label("sent_mode")
    stamp = sa.bindparam("b_now", type_=replaced_answers.c.created_at.type).label("created_at")
    columns = [c.job_id, c.n, c.custom_id, mode, c.sent_at, *literal.values(), c.emulated, stamp]
    rows = sa.select(*columns).where(c.custom_id == sa.bindparam("b_cid"))
    names = ["job_id", "n", "custom_id", "sent_mode", "sent_at", *TOKENS, "emulated", "created_at"]
    return sa.insert(replaced_answers).from_select(names, rows)


def _filing_row(batch_id: str, filed: ChunkResult, now: datetime) -> dict[str, Any]:
    """The bound values of one result in the bulk filing statements."""
    usage = filed.usage or Usage()
    row: dict[str, Any] = {"b_cid": filed.custom_id, "b_batch": batch_id, "b_now": now}
    row |= {f"b_{name}": getattr(usage, name) for name in TOKENS}
    row["b_mode"] = sent_mode_of(batch_id).value
    if ResultType(filed.result) is ResultType.SUCCEEDED:
        if filed.answer is None:
            raise ValueError("a succeeded result needs its answer")
        return {**row, "b_answer": filed.answer}
    message = filed.error_message
    return {
        **row,
        "b_error_class": filed.error_class or ResultType(filed.result).value,
        "b_error_message": None if message is None else clip(message),
    }


@functools.cache
def paid_answers() -> sa.Subquery:
    """Every answer's usage, a row each: the chunks' current answers and the paid ones that no longer
    stand (``replaced_answers``: redone, replaced, cut short), so each stays counted. Every total sums
    this."""
    c, r = chunk_rows.c, replaced_answers.c
    current = sa.select(
        c.job_id,
        c.status,
        c.sent_mode,
        c.sent_at,
        sa.case((c.emulated, 1), else_=0).label("emulated"),
        sa.case((c.reused_from.is_not(None), 1), else_=0).label("reused"),
        *(c[name] for name in TOKENS),
    )
    replaced = sa.select(
        r.job_id,
        sa.literal_column(f"'{ChunkStatus.SUCCEEDED.value}'"),
        r.sent_mode,
        r.sent_at,
        sa.case((r.emulated, 1), else_=0),
        sa.literal_column("0"),
        *(r[name] for name in TOKENS),
    )
    return sa.union_all(current, replaced).subquery("paid_answers")


@functools.lru_cache(maxsize=2)
def _chunk_upsert(dialect: str) -> Any:
    """Insert chunks, or replace those neither answered under the same processing key nor in flight
    (built once per backend)."""
    insert = insert_on(dialect, chunk_rows)
    kept = sa.and_(
        chunk_rows.c.status == ChunkStatus.SUCCEEDED.value,
        chunk_rows.c.processing_key == insert.excluded.processing_key,
    )
    replaced = {name: insert.excluded[name] for name in (*CHUNK_COLUMNS, "updated_at")}
    in_flight = chunk_rows.c.status == ChunkStatus.SUBMITTED.value
    return insert.on_conflict_do_update(
        index_elements=["job_id", "n"], set_=replaced, where=sa.and_(~kept, ~in_flight)
    )


@functools.lru_cache(maxsize=1)
def _finish_prepared() -> sa.Update:
    """Move held jobs to prepared, releasing their leases (built once; see ``held_values``)."""
    done = {**RELEASED_LEASE, "status": JobStatus.PREPARED.value, "attempts": 0}
    stamp = sa.bindparam("finished_at", type_=job_rows.c.updated_at.type)
    return (
        sa.update(job_rows)
        .where(held_by_all())
        .values({**done, "updated_at": stamp})
        .returning(job_rows.c.id)
    )


def _brought_tokens(usage: Usage) -> bool:
    return any(getattr(usage, name) for name in TOKENS)


def _replaced_answers(conn: Connection, chunks: Sequence[ChunkRecord]) -> list[tuple[int, int]]:
    """The (job, n) of these chunks whose stored answer was paid for and which the upsert replaces
    (not in flight, not answered under the same processing key)."""
    c = chunk_rows.c
    keys = {(r.job_id, r.n): r.processing_key for r in chunks}
    paid = sa.or_(*(c[name] > 0 for name in TOKENS))
    # An emulated answer was never paid: the real answer that replaces it is the chunk's only one.
    query = sa.select(c.job_id, c.n, c.status, c.processing_key).where(
        c.job_id.in_({job_id for job_id, _ in keys}),
        paid,
        ~c.emulated,
        c.status != ChunkStatus.SUBMITTED.value,
    )
    return [
        (job_id, n)
        for job_id, n, status, key in conn.execute(query)
        if (job_id, n) in keys and not (status == ChunkStatus.SUCCEEDED.value and key == keys[(job_id, n)])
    ]


class ChunkQueries(SqlBase):
    """The chunks part of ``SqlStateStore``."""

    def save_chunks(self, job_id: int, chunks: Sequence[ChunkRecord]) -> None:
        """Upsert a job's chunks by (job, n); never deletes.

        A chunk that already succeeded under the same processing key keeps its answer and usage
        (a new processing key — another prompt version or model — replaces it). A chunk submitted in
        a batch or call stays as it is: its answer is on its way, and is paid for.
        """
        if any(record.job_id != job_id for record in chunks):
            raise ValueError(f"chunks of another job given to save_chunks({job_id})")
        if chunks:
            with self._write() as conn:
                self._upsert_chunks(conn, chunks)

    def record_prepared(self, chunks: Sequence[ChunkRecord], finished: Sequence[Lease]) -> list[Lease]:
        """In one transaction: save prepared chunks (as ``save_chunks`` does, of any jobs) and move
        the jobs of ``finished`` to prepared, releasing their leases. The leases that still held."""
        if not chunks and not finished:
            return []
        held: list[Lease] = []
        with self._write() as conn:
            if chunks:
                self._upsert_chunks(conn, chunks)
            now = self._now()
            for group in in_groups(list(finished)):
                moved = set(conn.scalars(_finish_prepared(), {**held_values(group), "finished_at": now}))
                held += [lease for lease in group if lease.job_id in moved]
        return held

    def _upsert_chunks(self, conn: Connection, chunks: Sequence[ChunkRecord]) -> None:
        upsert = _chunk_upsert(self._dialect)
        now = self._now()
        for group in in_groups(list(chunks)):  # a paid answer the upsert replaces stays counted
            replaced = _replaced_answers(conn, group)
            if replaced:
                conn.execute(keep_usage(sa.tuple_(chunk_rows.c.job_id, chunk_rows.c.n).in_(replaced), now))
        rows = [
            {**chunk_values(r), "job_id": r.job_id, "n": r.n, "created_at": now, "updated_at": now}
            for r in chunks
        ]
        conn.execute(upsert, rows)

    def get_chunks(self, job_id: int) -> list[ChunkRecord]:
        """A job's chunks in order of n."""
        query = sa.select(chunk_rows).where(chunk_rows.c.job_id == job_id).order_by(chunk_rows.c.n)
        with self._read() as conn:
            return [chunk_record(row) for row in conn.execute(query)]

    def chunks_of(self, job_ids: Iterable[int]) -> dict[int, list[ChunkRecord]]:
        """The chunks of each of these jobs, in order of n (one query per slice of ids); a job
        without chunks maps to an empty list."""
        found: dict[int, list[ChunkRecord]] = {job_id: [] for job_id in job_ids}
        with self._read() as conn:
            for group in in_groups(sorted(found)):
                query = sa.select(chunk_rows).where(chunk_rows.c.job_id.in_(group))
                for row in conn.execute(query.order_by(chunk_rows.c.job_id, chunk_rows.c.n)):
                    record = chunk_record(row)
                    found[record.job_id].append(record)
        return found

    def chunk_counts(self, job_ids: Iterable[int] | None = None) -> dict[int, dict[ChunkStatus, int]]:
        """For each job with chunks: how many are in each status (zeros included)."""
        query = sa.select(chunk_rows.c.job_id, chunk_rows.c.status, sa.func.count()).group_by(
            chunk_rows.c.job_id, chunk_rows.c.status
        )
        if job_ids is not None:
            query = query.where(chunk_rows.c.job_id.in_(list(job_ids)))
        counts: dict[int, dict[ChunkStatus, int]] = {}
        with self._read() as conn:
            for job_id, status, count in conn.execute(query):
                counts.setdefault(job_id, dict.fromkeys(ChunkStatus, 0))[ChunkStatus(status)] = count
        return counts

    def chunk_progress(self, job_ids: Iterable[int]) -> dict[int, ChunkProgress]:
        """For each of these jobs with chunks: what its progress is made of, in one query."""
        c = chunk_rows.c
        query = sa.select(c.job_id, c.status, c.batch_id, sa.func.count()).group_by(
            c.job_id, c.status, c.batch_id
        )
        total: Counter[int] = Counter()
        succeeded: Counter[int] = Counter()
        in_flight: dict[int, Counter[str]] = {}
        with self._read() as conn:
            rows = [
                row
                for group in in_groups(list(job_ids))
                for row in conn.execute(query.where(c.job_id.in_(group)))
            ]
            for job_id, status, batch_id, count in rows:
                total[job_id] += count
                if status == ChunkStatus.SUCCEEDED.value:
                    succeeded[job_id] += count
                elif status == ChunkStatus.SUBMITTED.value and batch_id:
                    in_flight.setdefault(job_id, Counter())[batch_id] += count
        return {j: ChunkProgress(n, succeeded[j], dict(in_flight.get(j, {}))) for j, n in total.items()}

    def mark_chunks_submitted(self, custom_ids: Sequence[str], batch_id: str) -> int:
        """Chunks that are prepared or awaiting retry are now in ``batch_id``; how many moved."""
        moved = 0
        with self._write() as conn:
            now = self._now()
            for group in in_groups(list(custom_ids)):
                update = (
                    sa.update(chunk_rows)
                    .where(chunk_rows.c.custom_id.in_(group), chunk_rows.c.status.in_(SUBMITTABLE))
                    .values(status=ChunkStatus.SUBMITTED.value, batch_id=batch_id, updated_at=now)
                )
                moved += conn.execute(update).rowcount
        return moved

    def release_chunks(self, batch_id: str, custom_ids: Sequence[str] | None = None) -> int:
        """Chunks still submitted in ``batch_id`` (all, or these) go back to prepared, no try counted:
        work parked by a spend limit, or synchronous calls cut short by a restart."""
        where = [chunk_rows.c.batch_id == batch_id, chunk_rows.c.status == ChunkStatus.SUBMITTED.value]
        groups = [None] if custom_ids is None else in_groups(list(custom_ids))
        moved = 0
        with self._write() as conn:
            values = {"status": ChunkStatus.PREPARED.value, "batch_id": None, "updated_at": self._now()}
            for group in groups:
                chosen = where if group is None else [*where, chunk_rows.c.custom_id.in_(group)]
                moved += conn.execute(sa.update(chunk_rows).where(*chosen).values(values)).rowcount
        return moved

    def submitted_chunk_ids(self, batch_id: str) -> list[str]:
        """custom_ids of the chunks still submitted in ``batch_id``, sorted."""
        query = (
            sa.select(chunk_rows.c.custom_id)
            .where(chunk_rows.c.batch_id == batch_id, chunk_rows.c.status == ChunkStatus.SUBMITTED.value)
            .order_by(chunk_rows.c.custom_id)
        )
        with self._read() as conn:
            return list(conn.execute(query).scalars())

    def release_stranded_chunks(self, tags: Sequence[str] = ()) -> int:
        """Chunks submitted in a batch no longer in flight (ended, lost, or never recorded) go to
        RETRY without a try counted; chunks carrying one of ``tags``, or ``tag:…`` (sync calls), are
        left alone."""
        live = sa.select(batch_rows.c.anthropic_id).where(
            batch_rows.c.anthropic_id.is_not(None),
            batch_rows.c.status.in_([s.value for s in ACTIVE_BATCH_STATUSES]),
        )
        stranded = [
            chunk_rows.c.status == ChunkStatus.SUBMITTED.value,
            sa.or_(chunk_rows.c.batch_id.is_(None), chunk_rows.c.batch_id.not_in(live)),
        ]
        for tag in tags:
            kept = sa.or_(chunk_rows.c.batch_id == tag, chunk_rows.c.batch_id.startswith(f"{tag}:"))
            stranded.append(sa.or_(chunk_rows.c.batch_id.is_(None), ~kept))
        with self._write() as conn:
            values = {"status": ChunkStatus.RETRY.value, "updated_at": self._now()}
            return int(conn.execute(sa.update(chunk_rows).where(*stranded).values(values)).rowcount)

    def unsettled_jobs(self) -> list[int]:
        """Jobs whose status lags their chunks: submitted with no chunk in flight, or prepared with
        nothing left to send. Settling them moves them on (a crash between the two writes)."""

        def having(*statuses: ChunkStatus) -> sa.Exists:
            return sa.exists().where(
                chunk_rows.c.job_id == job_rows.c.id, chunk_rows.c.status.in_([s.value for s in statuses])
            )

        owned = sa.exists().where(chunk_rows.c.job_id == job_rows.c.id)
        submitted = sa.and_(job_rows.c.status == "submitted", owned, ~having(ChunkStatus.SUBMITTED))
        prepared = sa.and_(
            job_rows.c.status == "prepared", owned, ~having(ChunkStatus.PREPARED, ChunkStatus.RETRY)
        )
        query = sa.select(job_rows.c.id).where(sa.or_(submitted, prepared)).order_by(job_rows.c.id)
        with self._read() as conn:
            return list(conn.execute(query).scalars())

    def file_result(
        self,
        custom_id: str,
        batch_id: str,
        result: ResultType,
        *,
        answer: str | None = None,
        usage: Usage | None = None,
        error_class: str | None = None,
        error_message: str | None = None,
        retry: bool = False,
        max_attempts: int = 3,
    ) -> bool:
        """``ChunkStates.file_result``: one UPDATE of the chunk still SUBMITTED in ``batch_id``."""
        error = (error_class, error_message)
        values = _result_values(batch_id, result, answer, usage, error, retry, max_attempts)
        update = sa.update(chunk_rows).where(
            chunk_rows.c.custom_id == custom_id,
            chunk_rows.c.batch_id == batch_id,
            chunk_rows.c.status == ChunkStatus.SUBMITTED.value,
        )
        unusable = (
            ResultType(result) is not ResultType.SUCCEEDED and usage is not None and _brought_tokens(usage)
        )
        with self._write() as conn:
            now = self._now()
            filed = conn.execute(update.values(values).values(updated_at=now)).rowcount == 1
            if filed and unusable:
                assert usage is not None
                conn.execute(unusable_usage(custom_id, batch_id, usage, now))
            return filed

    def file_results(
        self, batch_id: str, results: Sequence[ChunkResult], *, max_attempts: int = 3
    ) -> set[str]:
        """``ChunkStates.file_results``: per slice, one SELECT of the chunks still SUBMITTED in
        ``batch_id`` (locked on PostgreSQL) and one UPDATE each for answers, errors to retry and
        failures, bound a row a chunk; the paid answers not kept go to ``replaced_answers``."""
        first: dict[str, ChunkResult] = {}
        for filed in results:
            first.setdefault(filed.custom_id, filed)
        c = chunk_rows.c
        done: set[str] = set()
        with self._write() as conn:
            now = self._now()
            for group in in_groups(list(first.values())):
                open_ = sa.select(c.custom_id).where(
                    c.custom_id.in_([filed.custom_id for filed in group]),
                    c.batch_id == batch_id,
                    c.status == ChunkStatus.SUBMITTED.value,
                )
                still = set(conn.scalars(open_.with_for_update()))
                chosen = [filed for filed in group if filed.custom_id in still]
                self._file_chosen(conn, batch_id, chosen, max_attempts, now)
                done |= still
        return done

    @staticmethod
    def _file_chosen(
        conn: Connection, batch_id: str, chosen: Sequence[ChunkResult], max_attempts: int, now: datetime
    ) -> None:
        rows = {filed.custom_id: _filing_row(batch_id, filed, now) for filed in chosen}
        statements: dict[Any, list[dict[str, Any]]] = {}
        for filed in chosen:
            if ResultType(filed.result) is ResultType.SUCCEEDED:
                statement = _file_answers()
            else:
                statement = _file_errors(filed.retry, max_attempts)
            statements.setdefault(statement, []).append(rows[filed.custom_id])
        for statement, bound in statements.items():
            conn.execute(statement, bound)
        unusable = [
            rows[filed.custom_id]
            for filed in chosen
            if ResultType(filed.result) is not ResultType.SUCCEEDED
            and filed.usage is not None
            and _brought_tokens(filed.usage)
        ]
        if unusable:
            conn.execute(_keep_unusable(), unusable)

    def usage_totals(self, job_id: int | None = None) -> Usage:
        """Token sums over all answers, or one job's (the answers its redos replaced included)."""
        paid = paid_answers()
        query = sa.select(*(sa.func.coalesce(sa.func.sum(paid.c[name]), 0) for name in TOKENS))
        if job_id is not None:
            query = query.where(paid.c.job_id == job_id)
        with self._read() as conn:
            row = conn.execute(query).one()
        return Usage(*(int(value) for value in row))

    def request_totals(self, job_ids: Iterable[int] | None = None) -> RequestTotals:
        """Tokens by sent mode and answer origins over all answers, or those of ``job_ids`` (the
        answers their redos replaced included)."""
        paid = paid_answers()
        mode = sa.func.coalesce(paid.c.sent_mode, ProcessingMode.BATCH.value)
        sums = [sa.func.coalesce(sa.func.sum(paid.c[name]), 0) for name in TOKENS]
        origins = (sa.func.sum(paid.c.emulated), sa.func.sum(paid.c.reused))
        query = sa.select(mode, sa.func.count(), *origins, *sums).group_by(mode)
        groups: list[list[int] | None] = [None] if job_ids is None else list(in_groups(list(job_ids)))
        rows: list[Any] = []
        with self._read() as conn:
            for group in groups:
                chosen = query if group is None else query.where(paid.c.job_id.in_(group))
                rows.extend(conn.execute(chosen))
        return _totals(rows)

    def request_totals_by_job(self, job_ids: Iterable[int]) -> dict[int, RequestTotals]:
        """``request_totals([job])`` of each of these jobs, by job, in one statement (per 1,000)."""
        paid = paid_answers()
        mode = sa.func.coalesce(paid.c.sent_mode, ProcessingMode.BATCH.value)
        sums = [sa.func.coalesce(sa.func.sum(paid.c[name]), 0) for name in TOKENS]
        origins = (sa.func.sum(paid.c.emulated), sa.func.sum(paid.c.reused))
        query = sa.select(paid.c.job_id, mode, sa.func.count(), *origins, *sums).group_by(paid.c.job_id, mode)
        rows: dict[int, list[Any]] = {job_id: [] for job_id in job_ids}
        with self._read() as conn:
            for group in in_groups(sorted(rows)):
                for row in conn.execute(query.where(paid.c.job_id.in_(group))):
                    rows[int(row[0])].append(row[1:])
        return {job_id: _totals(found) for job_id, found in rows.items()}

    def answers_for(self, keys: Sequence[str]) -> dict[str, ChunkRecord]:
        """A succeeded chunk for each of ``keys`` that has one (the oldest): answers already held."""
        found: dict[str, ChunkRecord] = {}
        succeeded = chunk_rows.c.status == ChunkStatus.SUCCEEDED.value
        with self._read() as conn:
            for group in in_groups(sorted(set(keys))):
                query = (
                    sa.select(chunk_rows)
                    .where(succeeded, chunk_rows.c.processing_key.in_(group))
                    .order_by(chunk_rows.c.id.desc())
                )
                found |= {row.processing_key: chunk_record(row) for row in conn.execute(query)}
        return found

    def record_sent(self, sent: Mapping[str, tuple[ProcessingMode, float]]) -> None:
        """Chunks about to be sent: custom_id → (mode, expected cost in US dollars); stamped now."""
        if not sent:
            return
        c = chunk_rows.c
        values = {
            "sent_mode": sa.bindparam("b_mode"),
            "estimated_cost_usd": sa.bindparam("b_cost"),
            "sent_at": sa.bindparam("b_now", type_=c.sent_at.type),
        }
        update = sa.update(chunk_rows).where(c.custom_id == sa.bindparam("b_cid")).values(values)
        now = self._now()
        rows = [
            {"b_cid": cid, "b_mode": ProcessingMode(mode).value, "b_cost": cost, "b_now": now}
            for cid, (mode, cost) in sent.items()
        ]
        with self._write() as conn:
            conn.execute(update, rows)  # one statement, a row bound per chunk

    def spend_since(
        self, since: datetime, run: str | None = None
    ) -> tuple[float, dict[ProcessingMode, Usage]]:
        """What requests sent since ``since`` commit: expected cost of those still in flight, and the
        tokens of those answered (the answers a redo replaced included), by the mode they were sent
        with; with ``run``, of its jobs only."""
        paid = paid_answers()
        flying = sa.and_(chunk_rows.c.sent_at >= since, chunk_rows.c.status == ChunkStatus.SUBMITTED.value)
        answered_since = sa.and_(paid.c.sent_at >= since, paid.c.status != ChunkStatus.SUBMITTED.value)
        if run is not None:
            governed = sa.select(job_rows.c.id).where(job_rows.c.spend_run == run)
            flying = sa.and_(flying, chunk_rows.c.job_id.in_(governed))
            answered_since = sa.and_(answered_since, paid.c.job_id.in_(governed))
        in_flight = sa.select(sa.func.coalesce(sa.func.sum(chunk_rows.c.estimated_cost_usd), 0.0))
        mode = sa.func.coalesce(paid.c.sent_mode, ProcessingMode.BATCH.value)
        sums = [sa.func.coalesce(sa.func.sum(paid.c[name]), 0) for name in TOKENS]
        answered = sa.select(mode, *sums).where(answered_since).group_by(mode)
        with self._read() as conn:
            expected = float(conn.execute(in_flight.where(flying)).scalar() or 0.0)
            usage = {
                ProcessingMode(row[0]): Usage(*(int(v) for v in row[1:])) for row in conn.execute(answered)
            }
        return expected, usage


def _totals(rows: Sequence[Any]) -> RequestTotals:
    """RequestTotals of (mode, answers, emulated, reused, *tokens) rows, a mode in several added."""
    usages: dict[ProcessingMode, list[Usage]] = {}
    counts = [0, 0, 0]
    for row in rows:
        usages.setdefault(ProcessingMode(row[0]), []).append(Usage(*(int(v) for v in row[4:])))
        counts = [total + int(v or 0) for total, v in zip(counts, row[1:4], strict=True)]
    return RequestTotals({name: add_usage(items) for name, items in usages.items()}, *counts)
