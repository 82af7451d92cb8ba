"""Jobs: registration deduplicated by content, conditional transitions, and fenced leases.

A job is *held* while ``lease_expires_at`` is set and in the future. Every claim raises the job's
``lease_token``; renewing and finishing require the token still to match, so an owner whose lease
expired and was taken over is refused (``LeaseLost``) however late it wakes up.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from raybatch.errors import InvalidSource, LeaseLost, SourceProblem, retried_on_rerun
from raybatch.models import (
    REDO,
    REDO_FRESH,
    TERMINAL_JOB_STATUSES,
    JobRecord,
    JobStatus,
    Lease,
    Priority,
    ProcessingMode,
    SourceKind,
)
from raybatch.state.base import (
    RELEASED_LEASE,
    SqlBase,
    clip,
    held_by,
    held_by_all,
    held_values,
    in_groups,
    insert_on,
)
from raybatch.state.port import JobGlance, JobTotals, NewJob
from raybatch.state.rows import MODE, PRIORITY, STATUS, job_record
from raybatch.state.schema import documents as document_rows
from raybatch.state.schema import errors, jobs

# Columns a caller may set along with a status change.
JOB_FIELDS = frozenset(
    {"pages", "progress", "mode", "attempts", "error_class", "error_message", "classes_sha"}
)
_CLAIM_ROUNDS = 3  # re-select after losing races, so a claimer still fills its limit
_LEASES_PER_STATEMENT = 10_000  # 30,000 parameters a statement, within every backend's limit
# Claims take urgent jobs first, then the oldest.
_FIRST = (sa.case((jobs.c.priority == Priority.URGENT.value, 0), else_=1), jobs.c.id)


_UNSENT = [s.value for s in (JobStatus.PENDING, JobStatus.PREPARING, JobStatus.PREPARED, JobStatus.FAILED)]
# Failures of a source's place, not its content: the same content registered again is read anew.
_WHERE_IT_WAS = (SourceProblem.UNREADABLE, SourceProblem.CHANGED, SourceProblem.NOT_A_FILE)
_LIVE_OR_FAILED = (jobs.c.status.not_in([JobStatus.COMPLETED.value, JobStatus.CANCELED.value]),)


def _fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(fields) - JOB_FIELDS
    if unknown:
        raise TypeError(f"not job fields: {sorted(unknown)}")
    values = dict(fields)
    if values.get("error_message") is not None:
        values["error_message"] = clip(values["error_message"])
    return values


def _misplaced(job: JobRecord) -> bool:
    """Whether the job failed for where its file was (gone, replaced, not a file), not for its
    content: registered again by its content, it is taken up again."""
    reasons = tuple(f"{reason}:" for reason in _WHERE_IT_WAS)
    return job.error_class == InvalidSource.__name__ and (job.error_message or "").startswith(reasons)


def _statuses(statuses: Iterable[JobStatus]) -> list[str]:
    return [JobStatus(s).value for s in statuses]


@functools.lru_cache(maxsize=64)
def _claimable(from_statuses: tuple[str, ...], to_status: JobStatus) -> sa.ColumnElement[bool]:
    """Claimable now (bound as ``claim_now`` at execution): built once per pair of statuses."""
    now = sa.bindparam("claim_now", type_=jobs.c.lease_expires_at.type)
    free = sa.or_(jobs.c.lease_expires_at.is_(None), jobs.c.lease_expires_at <= now)
    expired = sa.and_(jobs.c.lease_expires_at.is_not(None), jobs.c.lease_expires_at <= now)
    return sa.or_(
        sa.and_(jobs.c.status.in_(from_statuses), free),
        sa.and_(jobs.c.status == JobStatus(to_status).value, expired),
    )


@functools.lru_cache(maxsize=64)
def _claimable_query(
    from_statuses: tuple[str, ...], to_status: JobStatus, priority: Priority | None
) -> sa.Select[Any]:
    """The jobs claimable now, first ``claim_limit`` of them (both bound at execution)."""
    claimable = _claimable(from_statuses, to_status)
    if priority is not None:
        claimable = sa.and_(claimable, jobs.c.priority == Priority(priority).value)
    return sa.select(jobs).where(claimable).order_by(*_FIRST).limit(sa.bindparam("claim_limit"))


@functools.lru_cache(maxsize=2)
def _job_insert(dialect: str) -> Any:
    """Insert jobs, skipping a dedupe key that exists; the rows made (built once per backend)."""
    insert = insert_on(dialect, jobs).on_conflict_do_nothing(index_elements=["dedupe_key"])
    return insert.returning(*jobs.c)


@functools.lru_cache(maxsize=64)
def _take(from_statuses: tuple[str, ...], to_status: JobStatus) -> sa.Update:
    """Claim the listed jobs still claimable (ids, owner, expiry and now bound at execution):
    built once per pair of statuses, so a claim costs no statement building."""
    stamp = jobs.c.lease_expires_at.type
    return (
        sa.update(jobs)
        .where(jobs.c.id.in_(sa.bindparam("claim_ids", expanding=True)), _claimable(from_statuses, to_status))
        .values(
            status=JobStatus(to_status).value,
            lease_owner=sa.bindparam("claim_owner"),
            lease_token=jobs.c.lease_token + 1,
            lease_expires_at=sa.bindparam("claim_expires", type_=stamp),
            attempts=jobs.c.attempts + 1,
            updated_at=sa.bindparam("claim_at", type_=stamp),
        )
        .returning(*jobs.c)
    )


@dataclass(frozen=True)
class _Claim:
    """One claim_jobs call: who claims, from and into which statuses, and until when."""

    worker_id: str
    from_statuses: tuple[str, ...]
    to_status: JobStatus
    now: datetime
    expires: datetime

    @property
    def claimable(self) -> sa.ColumnElement[bool]:
        return _claimable(self.from_statuses, self.to_status)

    def take(self, conn: Connection, ids: list[int]) -> list[tuple[Lease, JobRecord]]:
        """Every one of these jobs still claimable, in one UPDATE; the others are left out.

        The claimable test is the UPDATE's own condition, so of two processes claiming the same
        job only one matches its row."""
        values = {
            "claim_ids": ids,
            "claim_owner": self.worker_id,
            "claim_expires": self.expires,
            "claim_at": self.now,
            "claim_now": self.now,
        }
        won = [
            (Lease(row.id, self.worker_id, row.lease_token, self.expires, row.attempts), job_record(row))
            for row in conn.execute(_take(self.from_statuses, self.to_status), values)
        ]
        return _first(won)

    def take_among(self, conn: Connection, ids: list[int], limit: int) -> list[tuple[Lease, JobRecord]]:
        """Up to ``limit`` of these jobs, urgent ones first, then in id order.

        Looked up by primary key only: a status filter here lets SQLite's planner walk the status
        index over the whole backlog. The UPDATE of ``take`` checks the claim anyway.
        """
        if len(ids) <= limit:
            return self.take(conn, ids)
        query = sa.select(jobs.c.id).where(jobs.c.id.in_(ids)).order_by(*_FIRST)
        ordered = list(conn.scalars(query))
        won: list[tuple[Lease, JobRecord]] = []
        while ordered and len(won) < limit:
            some, ordered = ordered[: limit - len(won)], ordered[limit - len(won) :]
            won += self.take(conn, some)
        return won


def _first(won: list[tuple[Lease, JobRecord]]) -> list[tuple[Lease, JobRecord]]:
    """Urgent jobs first, then by id: the order claims are made in."""
    return sorted(won, key=lambda pair: (pair[1].priority is not Priority.URGENT, pair[1].id))


class JobQueries(SqlBase):
    """The jobs part of ``SqlStateStore``."""

    def register_job(
        self,
        *,
        sha256: str,
        source_uri: str,
        source_name: str,
        kind: SourceKind,
        size_bytes: int,
        mode: ProcessingMode = ProcessingMode.BATCH,
        force: bool = False,
        pages: int | None = None,
        priority: Priority = Priority.NORMAL,
        spend_run: str | None = None,
    ) -> tuple[JobRecord, bool]:
        """``JobStates.register_job``; a forced job gets a dedupe key of its own."""
        new = NewJob(sha256, source_uri, source_name, kind, size_bytes, mode, pages, priority, spend_run)
        return self.register_jobs([new], force=force)[0]

    def register_jobs(self, new: Sequence[NewJob], *, force: bool = False) -> list[tuple[JobRecord, bool]]:
        """``JobStates.register_jobs``: the jobs that exist are looked up in one query, the others
        inserted in one statement."""
        if not new:
            return []
        now = self._now()
        keys = [f"{n.sha256}:{uuid.uuid4().hex}" if force else n.sha256 for n in new]
        with self._write() as conn:
            latest = {} if force else self._latest_of(conn, sorted({n.sha256 for n in new}))
            found: dict[int, tuple[JobRecord, bool]] = {}
            for i, spec in enumerate(new):
                if (existing := latest.get(spec.sha256)) is not None:
                    found[i] = (self._existing(conn, existing, spec, now), False)
                    latest[spec.sha256] = found[i][0]
            fresh = [(i, spec) for i, spec in enumerate(new) if i not in found]
            made = self._insert_jobs(conn, [(keys[i], spec) for i, spec in fresh], now)
            for i, _ in fresh:
                if (job := made.pop(keys[i], None)) is not None:
                    found[i] = (job, True)
                else:  # the same content earlier in this call, or a concurrent registration, won
                    row = conn.execute(sa.select(jobs).where(jobs.c.dedupe_key == keys[i])).one()
                    found[i] = (job_record(row), False)
        return [found[i] for i in range(len(new))]

    def _existing(self, conn: Connection, existing: JobRecord, spec: NewJob, now: datetime) -> JobRecord:
        """The job an existing registration finds: read from where the file is now (a moved or
        renamed file), made urgent, or reopened after a failure a rerun retries (one of where
        the file was included: its content is here again)."""
        moved: dict[str, Any] = {}
        if spec.source_uri != existing.source_uri:
            moved = {"source_uri": spec.source_uri, "source_name": spec.source_name, "updated_at": now}
            existing = replace(existing, source_uri=spec.source_uri, source_name=spec.source_name)
        if spec.spend_run is not None:  # a capped run takes the job under its cap
            moved["spend_run"] = spec.spend_run
        if moved:
            conn.execute(sa.update(jobs).where(jobs.c.id == existing.id).values(moved))
        if spec.priority is Priority.URGENT and existing.priority is not Priority.URGENT:
            self._urgent(conn, [existing.id], now)
            existing = self._job_in(conn, existing.id)
        if existing.status is JobStatus.FAILED and (
            retried_on_rerun(existing.error_class) or _misplaced(existing)
        ):
            return self._reopen(conn, existing.id, now) or existing
        return existing

    def _insert_jobs(
        self, conn: Connection, new: list[tuple[str, NewJob]], now: datetime
    ) -> dict[str, JobRecord]:
        """Insert these jobs (a dedupe key that exists is skipped); those made, by dedupe key."""
        if not new:
            return {}
        values = [
            {
                "sha256": spec.sha256,
                "dedupe_key": key,
                "source_uri": spec.source_uri,
                "source_name": spec.source_name,
                "kind": SourceKind(spec.kind).value,
                "size_bytes": spec.size_bytes,
                "mode": ProcessingMode(spec.mode).value,
                "priority": Priority(spec.priority).value,
                "status": JobStatus.PENDING.value,
                "pages": spec.pages,
                "spend_run": spec.spend_run,
                "progress": 0.0,
                "attempts": 0,
                "lease_token": 0,
                "created_at": now,
                "updated_at": now,
            }
            for key, spec in new
        ]
        insert = _job_insert(self._dialect)  # one statement, its rows sent as VALUES batches
        return {row.dedupe_key: job_record(row) for row in conn.execute(insert, values)}

    def set_priority(self, job_ids: Iterable[int], priority: Priority) -> list[int]:
        """Set the priority of these jobs, leases untouched; the ids changed.

        Made urgent, a job not yet sent (pending, preparing, prepared, failed) is also sent
        synchronously; one already sent keeps its mode and is written first once answered.
        Completed and canceled jobs are left as they are."""
        wanted = sorted(set(job_ids))
        changed: list[int] = []
        with self._write() as conn:
            now = self._now()
            for group in in_groups(wanted):
                if Priority(priority) is Priority.URGENT:
                    changed += self._urgent(conn, group, now)
                    continue
                normal = sa.update(jobs).where(jobs.c.id.in_(group), *_LIVE_OR_FAILED)
                normal = normal.values(priority=Priority.NORMAL.value, updated_at=now).returning(jobs.c.id)
                changed += [row.id for row in conn.execute(normal)]
        return sorted(changed)

    @staticmethod
    def _urgent(conn: Connection, ids: list[int], now: datetime) -> list[int]:
        changed = []
        for unsent in (True, False):
            where = jobs.c.status.in_(_UNSENT) if unsent else jobs.c.status.not_in(_UNSENT)
            values: dict[str, Any] = {"priority": Priority.URGENT.value, "updated_at": now}
            if unsent:
                values["mode"] = ProcessingMode.SYNC.value
            move = sa.update(jobs).where(jobs.c.id.in_(ids), where, *_LIVE_OR_FAILED).values(values)
            changed += [row.id for row in conn.execute(move.returning(jobs.c.id))]
        return changed

    def reopen_job(self, job_id: int) -> bool:
        """A failed job goes back to pending with a fresh budget; its chunks' answers are kept."""
        with self._write() as conn:
            return self._reopen(conn, job_id, self._now()) is not None

    @staticmethod
    def _reopen(conn: Connection, job_id: int, now: datetime) -> JobRecord | None:
        values = {
            **RELEASED_LEASE,
            "status": JobStatus.PENDING.value,
            "attempts": 0,
            "progress": 0.0,
            "error_class": None,
            "error_message": None,
            "updated_at": now,
        }
        where = sa.and_(jobs.c.id == job_id, jobs.c.status == JobStatus.FAILED.value)
        row = conn.execute(sa.update(jobs).where(where).values(values).returning(*jobs.c)).first()
        return None if row is None else job_record(row)

    @staticmethod
    def _latest_of(conn: Connection, digests: list[str]) -> dict[str, JobRecord]:
        """The newest job of each of these contents that has one (one ``raybatch redo`` is asking
        again for wins: its source's next run is what takes it up)."""
        latest: dict[str, JobRecord] = {}
        for group in in_groups(digests):
            for row in conn.execute(sa.select(jobs).where(jobs.c.sha256.in_(group)).order_by(jobs.c.id)):
                held = latest.get(row.sha256)
                if held is None or not (
                    held.status is JobStatus.PENDING and held.error_class in (REDO, REDO_FRESH)
                ):
                    latest[row.sha256] = job_record(row)
        return latest

    @staticmethod
    def _job_in(conn: Connection, job_id: int) -> JobRecord:
        return job_record(conn.execute(sa.select(jobs).where(jobs.c.id == job_id)).one())

    def get_job(self, job_id: int) -> JobRecord:
        """The job with this id; KeyError when there is none."""
        with self._read() as conn:
            row = conn.execute(sa.select(jobs).where(jobs.c.id == job_id)).first()
        if row is None:
            raise KeyError(f"no job {job_id}")
        return job_record(row)

    def get_jobs(self, job_ids: Iterable[int]) -> list[JobRecord]:
        """The jobs with these ids that exist, in id order."""
        wanted = sorted(set(job_ids))
        found: list[JobRecord] = []
        with self._read() as conn:
            for group in in_groups(wanted):
                rows = conn.execute(sa.select(jobs).where(jobs.c.id.in_(group)))
                found.extend(job_record(row) for row in rows)
        return sorted(found, key=lambda job: job.id)

    def glance_jobs(self, job_ids: Iterable[int], *, changed_within: float | None = None) -> list[JobGlance]:
        """A glance at each of these jobs that exists (no whole rows), in id order; with
        ``changed_within``, only those updated in the last so many seconds or being prepared or
        prepared under a lease that ran out (what a driver that died left)."""
        columns = (jobs.c.id, jobs.c.status, jobs.c.priority, jobs.c.mode, jobs.c.lease_expires_at)
        found: list[JobGlance] = []
        with self._read() as conn:
            changed: sa.ColumnElement[bool] = sa.true()
            if changed_within is not None:
                now = self._now()
                since = now - timedelta(seconds=changed_within)
                unheld = sa.or_(jobs.c.lease_expires_at.is_(None), jobs.c.lease_expires_at <= now)
                held = [JobStatus.PREPARING.value, JobStatus.PREPARED.value]
                left = sa.and_(jobs.c.status.in_(held), unheld)
                changed = sa.or_(jobs.c.updated_at >= since, left)
            for group in in_groups(sorted(set(job_ids))):
                query = sa.select(*columns).where(jobs.c.id.in_(group), changed).order_by(jobs.c.id)
                rows = conn.execute(query)
                found += [JobGlance(i, STATUS(s), PRIORITY(p), MODE(m), held) for i, s, p, m, held in rows]
        return found

    def spend_runs(self, job_ids: Iterable[int]) -> dict[int, str]:
        """The capped run governing each of these jobs that has one."""
        runs: dict[int, str] = {}
        with self._read() as conn:
            for group in in_groups(sorted(set(job_ids))):
                query = sa.select(jobs.c.id, jobs.c.spend_run).where(
                    jobs.c.id.in_(group), jobs.c.spend_run.is_not(None)
                )
                runs.update((job_id, run) for job_id, run in conn.execute(query))
        return runs

    def job_statuses(self, job_ids: Iterable[int]) -> dict[int, JobStatus]:
        """The status of each of these jobs that exists (one light query per slice of ids)."""
        statuses: dict[int, JobStatus] = {}
        with self._read() as conn:
            for group in in_groups(sorted(set(job_ids))):
                query = sa.select(jobs.c.id, jobs.c.status).where(jobs.c.id.in_(group))
                statuses.update((job_id, JobStatus(status)) for job_id, status in conn.execute(query))
        return statuses

    def list_jobs(
        self, statuses: Iterable[JobStatus] | None = None, *, limit: int | None = None, after_id: int = 0
    ) -> list[JobRecord]:
        """Jobs in id order, optionally only those in ``statuses``; ``limit`` of them past ``after_id``."""
        query = sa.select(jobs).where(jobs.c.id > after_id).order_by(jobs.c.id).limit(limit)
        if statuses is not None:
            query = query.where(jobs.c.status.in_(_statuses(statuses)))
        with self._read() as conn:
            return [job_record(row) for row in conn.execute(query)]

    def jobs_from_source(self, uri: str) -> list[JobRecord]:
        """Jobs whose source is ``uri`` or lies under it (a folder's or a prefix's files), by id."""
        folder = uri.rstrip("/") + "/"
        under = sa.or_(jobs.c.source_uri == uri, jobs.c.source_uri.startswith(folder, autoescape=True))
        with self._read() as conn:
            return [job_record(row) for row in conn.execute(sa.select(jobs).where(under).order_by(jobs.c.id))]

    def count_jobs(self, job_ids: Iterable[int] | None = None) -> dict[JobStatus, int]:
        """How many jobs (of ``job_ids``, or all) are in each status (every status, zero included)."""
        return dict(self.job_totals(job_ids).by_status)

    def job_totals(self, job_ids: Iterable[int] | None = None) -> JobTotals:
        """Jobs by status (and by priority), pages, batch-mode jobs and documents, by aggregate
        queries."""
        counts = dict.fromkeys(JobStatus, 0)
        by_priority = {p: dict.fromkeys(JobStatus, 0) for p in Priority}
        pages = batch_mode = documents = 0
        query = sa.select(
            jobs.c.status,
            sa.func.count(),
            sa.func.coalesce(sa.func.sum(jobs.c.pages), 0),
            sa.func.sum(sa.case((jobs.c.mode == ProcessingMode.BATCH.value, 1), else_=0)),
            jobs.c.priority,
        ).group_by(jobs.c.status, jobs.c.priority)
        docs = sa.select(sa.func.count()).select_from(document_rows)
        groups: list[list[int] | None] = [None] if job_ids is None else list(in_groups(sorted(set(job_ids))))
        with self._read() as conn:
            for group in groups:
                some = query if group is None else query.where(jobs.c.id.in_(group))
                for status, count, page_sum, batch, priority in conn.execute(some):
                    counts[JobStatus(status)] += count
                    by_priority[Priority(priority)][JobStatus(status)] += count
                    pages += int(page_sum or 0)
                    batch_mode += int(batch or 0)
                some_docs = docs if group is None else docs.where(document_rows.c.job_id.in_(group))
                documents += conn.execute(some_docs).scalar_one()
        return JobTotals(counts, pages, batch_mode, documents, by_priority)

    def claim_jobs(
        self,
        *,
        worker_id: str,
        from_statuses: Iterable[JobStatus],
        to_status: JobStatus,
        lease_seconds: float,
        limit: int,
        job_ids: Iterable[int] | None = None,
    ) -> list[Lease]:
        """``JobStates.claim_jobs``: the leases of ``claim_job_records``."""
        found = self.claim_job_records(
            worker_id=worker_id,
            from_statuses=from_statuses,
            to_status=to_status,
            lease_seconds=lease_seconds,
            limit=limit,
            job_ids=job_ids,
        )
        return [lease for lease, _ in found]

    def claim_job_records(
        self,
        *,
        worker_id: str,
        from_statuses: Iterable[JobStatus],
        to_status: JobStatus,
        lease_seconds: float,
        limit: int,
        job_ids: Iterable[int] | None = None,
    ) -> list[tuple[Lease, JobRecord]]:
        """As ``claim_jobs``, each lease with its job as the claim left it."""
        # Any number of ids: they are taken in IN (...) slices, in id order, until the limit is met.
        groups: list[list[int] | None] = [None] if job_ids is None else list(in_groups(sorted(set(job_ids))))
        won: list[tuple[Lease, JobRecord]] = []
        with self._write() as conn:
            now = self._now()
            statuses = _statuses(from_statuses)
            expires = now + timedelta(seconds=lease_seconds)
            claim = _Claim(worker_id, tuple(statuses), to_status, now, expires)
            for group in groups:
                if len(won) >= limit:
                    break
                won.extend(self._claim_some(conn, claim, group, limit - len(won)))
        return won

    @staticmethod
    def _claim_some(
        conn: Connection, claim: _Claim, ids: list[int] | None, limit: int
    ) -> list[tuple[Lease, JobRecord]]:
        """Up to ``limit`` jobs among ``ids`` (or any), re-selecting after races lost."""
        if ids is not None:
            return claim.take_among(conn, ids, limit)
        won: list[tuple[Lease, JobRecord]] = []
        for _ in range(_CLAIM_ROUNDS):
            query = sa.select(jobs.c.id).where(claim.claimable)
            if won:
                query = query.where(jobs.c.id.not_in([lease.job_id for lease, _ in won]))
            candidates = list(
                conn.scalars(query.order_by(*_FIRST).limit(limit - len(won)), {"claim_now": claim.now})
            )
            if candidates:
                won.extend(claim.take(conn, candidates))
            if len(won) >= limit or not candidates:
                break
        return _first(won)

    def claimable_jobs(
        self,
        from_statuses: Iterable[JobStatus],
        to_status: JobStatus,
        *,
        limit: int,
        priority: Priority | None = None,
    ) -> list[JobRecord]:
        """The first ``limit`` jobs (urgent first, then by id) that ``claim_jobs`` with these
        statuses would take now; only those of ``priority`` when given."""
        query = _claimable_query(tuple(_statuses(from_statuses)), to_status, priority)
        with self._read() as conn:
            rows = conn.execute(query, {"claim_now": self._now(), "claim_limit": limit})
            return [job_record(row) for row in rows]

    def renew_leases(self, leases: Sequence[Lease], lease_seconds: float) -> list[Lease]:
        """Extend every lease still held in one UPDATE; the renewed ones (those lost are left out)."""
        if not leases:
            return []
        renewed: list[Lease] = []
        with self._write() as conn:
            now = self._now()
            expires = now + timedelta(seconds=lease_seconds)
            for owner in sorted({lease.worker_id for lease in leases}):
                mine = [lease for lease in leases if lease.worker_id == owner]
                for start in range(0, len(mine), _LEASES_PER_STATEMENT):
                    group = mine[start : start + _LEASES_PER_STATEMENT]
                    # The id list lets every backend find the rows by primary key; the pairs fence.
                    ids = jobs.c.id.in_([x.job_id for x in group])
                    held = sa.tuple_(jobs.c.id, jobs.c.lease_token).in_([(x.job_id, x.token) for x in group])
                    renew = (
                        sa.update(jobs)
                        .where(ids, held, jobs.c.lease_owner == owner, jobs.c.lease_expires_at.is_not(None))
                        .values(lease_expires_at=expires, updated_at=now)
                        .returning(jobs.c.id)
                    )
                    kept = {row.id for row in conn.execute(renew)}
                    renewed.extend(replace(x, expires_at=expires) for x in group if x.job_id in kept)
        return renewed

    def hold_jobs(
        self, worker_id: str, job_ids: Sequence[int], status: JobStatus, lease_seconds: float
    ) -> list[int]:
        """``JobStates.hold_jobs``: one UPDATE per group of ids, owner and expiry only."""
        if not job_ids:
            return []
        held: list[int] = []
        with self._write() as conn:
            now = self._now()
            free = sa.or_(
                jobs.c.lease_owner == worker_id,
                jobs.c.lease_expires_at.is_(None),
                jobs.c.lease_expires_at <= now,
            )
            # updated_at moves too: a held job is watched over, not abandoned (see requeue_unheld)
            expires = now + timedelta(seconds=lease_seconds)
            values = {"lease_owner": worker_id, "lease_expires_at": expires, "updated_at": now}
            for group in in_groups(sorted(set(job_ids))):
                where = [jobs.c.id.in_(group), jobs.c.status == JobStatus(status).value, free]
                hold = sa.update(jobs).where(*where).values(values).returning(jobs.c.id)
                held.extend(row.id for row in conn.execute(hold))
        return held

    def requeue_unheld(self, job_id: int, from_status: JobStatus, idle_seconds: float) -> bool:
        """Back to pending a job in ``from_status`` that no lease holds and that has not moved for
        ``idle_seconds`` (its holder is gone); True when it went."""
        with self._write() as conn:
            now = self._now()
            where = [
                jobs.c.id == job_id,
                jobs.c.status == JobStatus(from_status).value,
                sa.or_(jobs.c.lease_expires_at.is_(None), jobs.c.lease_expires_at <= now),
                jobs.c.updated_at <= now - timedelta(seconds=idle_seconds),
            ]
            values = {**RELEASED_LEASE, "status": JobStatus.PENDING.value, "updated_at": now}
            return conn.execute(sa.update(jobs).where(*where).values(values)).rowcount == 1

    def holds(self, lease: Lease) -> bool:
        """Whether ``lease`` still holds its job (not taken over, released or canceled)."""
        with self._read() as conn:
            return conn.execute(sa.select(jobs.c.id).where(held_by(lease))).first() is not None

    def holding(self, leases: Sequence[Lease]) -> set[int]:
        """The jobs of ``leases`` that their lease still holds, in one SELECT (per 10,000)."""
        held: set[int] = set()
        if not leases:
            return held
        with self._read() as conn:
            for start in range(0, len(leases), _LEASES_PER_STATEMENT):
                group = leases[start : start + _LEASES_PER_STATEMENT]
                query = sa.select(jobs.c.id).where(held_by_all())
                held.update(row.id for row in conn.execute(query, held_values(group)))
        return held

    def finish_claims(self, leases: Sequence[Lease], to_status: JobStatus, **fields: Any) -> set[int]:
        """``finish_claim`` of many leases in one UPDATE (per 10,000), the same ``fields`` for
        all; the jobs moved on (a lease taken over or ended moves nothing, and is left out)."""
        values = {**_fields(fields), **RELEASED_LEASE, "status": JobStatus(to_status).value}
        moved: set[int] = set()
        if not leases:
            return moved
        with self._write() as conn:
            now = self._now()
            for start in range(0, len(leases), _LEASES_PER_STATEMENT):
                group = leases[start : start + _LEASES_PER_STATEMENT]
                finish = sa.update(jobs).where(held_by_all()).values(values).values(updated_at=now)
                moved.update(row.id for row in conn.execute(finish.returning(jobs.c.id), held_values(group)))
        return moved

    def renew_lease(self, lease: Lease, lease_seconds: float) -> Lease:
        """Extend a lease still held; raises LeaseLost when it was taken over or released."""
        with self._write() as conn:
            now = self._now()
            expires = now + timedelta(seconds=lease_seconds)
            renew = sa.update(jobs).where(held_by(lease)).values(lease_expires_at=expires, updated_at=now)
            if conn.execute(renew).rowcount != 1:
                raise LeaseLost(f"job {lease.job_id}: lease {lease.token} of {lease.worker_id} is gone")
        return replace(lease, expires_at=expires)

    def finish_claim(self, lease: Lease, to_status: JobStatus, **fields: Any) -> None:
        """Move a claimed job on and drop the lease; raises LeaseLost for a stale owner.

        ``fields`` may set pages, progress, mode, attempts (e.g. 0 to give the next phase a fresh
        budget), error_class and error_message.
        """
        values = {**_fields(fields), **RELEASED_LEASE, "status": JobStatus(to_status).value}
        with self._write() as conn:
            finish = sa.update(jobs).where(held_by(lease)).values(values).values(updated_at=self._now())
            if conn.execute(finish).rowcount != 1:
                raise LeaseLost(f"job {lease.job_id}: lease {lease.token} of {lease.worker_id} is gone")

    def transition(
        self,
        job_id: int,
        from_statuses: Iterable[JobStatus],
        to_status: JobStatus,
        *,
        lease: Lease | None = None,
        **fields: Any,
    ) -> bool:
        """One conditional UPDATE: True when the job was in one of ``from_statuses`` (and, with
        ``lease``, that lease still held it: a stale holder changes nothing).

        A transition ends any lease on the job, so its holder's next renew or finish is refused.
        """
        values = {**_fields(fields), **RELEASED_LEASE, "status": JobStatus(to_status).value}
        where = [jobs.c.id == job_id, jobs.c.status.in_(_statuses(from_statuses))]
        if lease is not None:
            where.append(held_by(lease))
        move = sa.update(jobs).where(*where).values(values)
        with self._write() as conn:
            return conn.execute(move.values(updated_at=self._now())).rowcount == 1

    def transition_jobs(
        self, job_ids: Iterable[int], from_statuses: Iterable[JobStatus], to_status: JobStatus, **fields: Any
    ) -> set[int]:
        """``JobStates.transition_jobs``: one conditional UPDATE … RETURNING per slice of ids, in one
        transaction; a job another writer moved meanwhile (a cancel) is left as it is."""
        ids = sorted(set(job_ids))
        if not ids:
            return set()
        values = {**_fields(fields), **RELEASED_LEASE, "status": JobStatus(to_status).value}
        chosen = jobs.c.status.in_(_statuses(from_statuses))
        moved: set[int] = set()
        with self._write() as conn:
            now = self._now()
            for group in in_groups(ids):
                move = (
                    sa.update(jobs).where(jobs.c.id.in_(group), chosen).values({**values, "updated_at": now})
                )
                moved.update(conn.scalars(move.returning(jobs.c.id)))
        return moved

    def fail_job(
        self, job_id: int, phase: str, error_class: str, message: str, *, lease: Lease | None = None
    ) -> bool:
        """Mark a non-terminal job failed and record why; with ``lease``, only while it holds.

        False when the job was already terminal; LeaseLost when ``lease`` no longer holds.
        """
        where = [jobs.c.id == job_id, jobs.c.status.not_in(_statuses(TERMINAL_JOB_STATUSES))]
        if lease is not None:
            where.append(held_by(lease))
        with self._write() as conn:
            now = self._now()
            values = {
                **RELEASED_LEASE,
                "status": JobStatus.FAILED.value,
                "error_class": error_class,
                "error_message": clip(message),
                "updated_at": now,
            }
            if conn.execute(sa.update(jobs).where(*where).values(values)).rowcount != 1:
                if lease is not None:
                    raise LeaseLost(f"job {job_id}: lease {lease.token} of {lease.worker_id} is gone")
                return False
            conn.execute(
                sa.insert(errors).values(
                    job_id=job_id, phase=phase, error_class=error_class, message=clip(message), created_at=now
                )
            )
        return True

    def set_progress(self, progress: Mapping[int, float]) -> None:
        """Write each job's progress (0..1) in one transaction."""
        if not progress:
            return
        update = (
            sa.update(jobs)
            .where(jobs.c.id == sa.bindparam("b_id"))
            .values(progress=sa.bindparam("b_progress"), updated_at=sa.bindparam("b_now"))
        )
        with self._write() as conn:
            now = self._now()
            rows = [
                {"b_id": job, "b_progress": float(value), "b_now": now} for job, value in progress.items()
            ]
            conn.execute(update, rows)
