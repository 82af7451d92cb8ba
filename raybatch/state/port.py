"""The state store's interface. The database is the source of truth; actors are caches.

One protocol per concern, as the implementation is split: ``JobStates``, ``ChunkStates``,
``BatchStates``, ``Catalog`` (documents, groups), ``PageTexts`` (the OCR cache), ``ErrorLog``,
``Flags`` (identity, pause flag, stored settings), ``Coordinators``, and the console's
``ConsoleReads`` (keyset pages for the web console) and ``ConsoleUsers``; ``StateStore`` is all of
them. A consumer names the slices it uses (``JobsWithChunks`` is the common pair).

Every job transition is one conditional UPDATE; claimed work carries a lease whose token fences
stale owners. Implementations: ``SqlStateStore`` (SQLite file, PostgreSQL), opened with
``raybatch.state.open_state``. Errors: ``DatabaseUnavailable`` (transient) when the database does
not answer or stays locked, ``LeaseLost`` for a stale lease holder, ``KeyError`` for an unknown id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from raybatch.models import (
    BatchStatus,
    CachedPage,
    ChunkRecord,
    ChunkStatus,
    ConsoleRole,
    Correction,
    CorrectionRecord,
    DocumentRecord,
    DocumentVersion,
    JobRecord,
    JobStatus,
    Lease,
    Priority,
    ProcessingMode,
    ResultType,
    SourceKind,
    Usage,
)
from raybatch.ocr.cache import PageTextCache, PageTextLookup


@dataclass(frozen=True)
class BatchRecord:
    """One Message Batch as we know it. ``id`` is ours; ``anthropic_id`` is set once created."""

    id: int
    anthropic_id: str | None
    status: BatchStatus
    request_count: int
    request_bytes: int
    created_at: datetime
    ended_at: datetime | None = None
    counts: Mapping[str, int] | None = None
    created_by: str | None = None  # the coordinator that recorded it (None: recorded before 0600)

    @property
    def active(self) -> bool:
        """Whether the batch may still bring results (creating, in progress, canceling, unknown)."""
        return self.status not in (BatchStatus.ENDED, BatchStatus.LOST)


@dataclass(frozen=True)
class NewJob:
    """One source file to register as a job (see ``register_job``)."""

    sha256: str
    source_uri: str
    source_name: str
    kind: SourceKind
    size_bytes: int
    mode: ProcessingMode = ProcessingMode.BATCH
    pages: int | None = None
    priority: Priority = Priority.NORMAL
    spend_run: str | None = None  # a capped run: its MAX_COST_USD governs the job from now on


@dataclass(frozen=True)
class JobGlance:
    """A job's status, priority, mode and the end of its lease: what the loops look at often."""

    id: int
    status: JobStatus
    priority: Priority
    mode: ProcessingMode
    held_until: datetime | None


@dataclass(frozen=True)
class JobTotals:
    """Aggregates over jobs: how many in each status, their pages, how many in batch mode, and
    the documents they produced."""

    by_status: Mapping[JobStatus, int]
    pages: int
    batch_mode: int
    documents: int
    by_priority: Mapping[Priority, Mapping[JobStatus, int]] = field(default_factory=dict)

    @property
    def jobs(self) -> int:
        return sum(self.by_status.values())


@dataclass(frozen=True)
class ChunkProgress:
    """A job's chunks as its progress sees them: how many, how many answered, and how many of the
    others each batch (or synchronous call) in flight holds, by its batch id."""

    total: int
    succeeded: int
    in_flight: Mapping[str, int] = field(default_factory=dict)

    def percent(self, batch_done: Mapping[str, float], answered: int = 0) -> float:
        """Percent done: answered chunks whole, each chunk in flight by its batch's done share
        (``batch_done``), and ``answered`` more (answers back but not yet filed)."""
        if not self.total:
            return 0.0
        in_batches = sum(batch_done.get(batch, 0.0) * n for batch, n in self.in_flight.items())
        return round(100 * min(1.0, (self.succeeded + answered + in_batches) / self.total), 1)


@dataclass(frozen=True)
class RequestTotals:
    """Chunks of some jobs: tokens by the mode they were sent with, and who answered them."""

    usage_by_mode: Mapping[ProcessingMode, Usage]
    requests: int = 0
    emulated: int = 0  # answered by the built-in emulator
    reused: int = 0  # took an answer already held instead of being sent


@dataclass(frozen=True)
class ChunkResult:
    """One result to file for a chunk (see ``ChunkStates.file_result``, whose arguments these are)."""

    custom_id: str
    result: ResultType
    answer: str | None = None
    usage: Usage | None = None
    error_class: str | None = None
    error_message: str | None = None
    retry: bool = False


@dataclass(frozen=True)
class ErrorRecord:
    """One classified failure of a job in a phase."""

    job_id: int | None
    phase: str
    error_class: str
    message: str
    created_at: datetime


class JobStates(Protocol):
    """Jobs: registration, reads, leases and transitions."""

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
        """The job for this content, and whether it was created now (same sha256 = same job,
        the newest one; ``force`` makes a new job anyway). ``source_name`` is metadata only;
        ``pages`` is recorded on a job created now; an urgent registration makes an existing
        job urgent; registered from another place, the job is read from there now; a
        ``spend_run`` (a capped run) takes the job under its cap."""
        ...

    def spend_runs(self, job_ids: Iterable[int]) -> dict[int, str]:
        """The capped run governing each of these jobs that has one."""
        ...

    def glance_jobs(self, job_ids: Iterable[int], *, changed_within: float | None = None) -> list[JobGlance]:
        """A glance at each of these jobs that exists (no whole rows), in id order; with
        ``changed_within``, only those updated in the last so many seconds or being prepared or
        prepared under a lease that ran out (what a driver that died left)."""
        ...

    def register_jobs(self, new: Sequence[NewJob], *, force: bool = False) -> list[tuple[JobRecord, bool]]:
        """``register_job`` for each of these, in one transaction; in the same order."""
        ...

    def set_priority(self, job_ids: Iterable[int], priority: Priority) -> list[int]:
        """Set the priority of these jobs, leases untouched; the ids changed. Made urgent, a job
        not yet sent is sent synchronously; completed and canceled jobs are left as they are."""
        ...

    def get_job(self, job_id: int) -> JobRecord:
        """The job with this id; KeyError when there is none."""
        ...

    def get_jobs(self, job_ids: Iterable[int]) -> list[JobRecord]:
        """The jobs with these ids that exist, in id order."""
        ...

    def job_statuses(self, job_ids: Iterable[int]) -> dict[int, JobStatus]:
        """The status of each of these jobs that exists (one light query per slice of ids)."""
        ...

    def list_jobs(
        self, statuses: Iterable[JobStatus] | None = None, *, limit: int | None = None, after_id: int = 0
    ) -> list[JobRecord]:
        """Jobs in id order, optionally only those in ``statuses``; ``limit`` of them past ``after_id``."""
        ...

    def jobs_from_source(self, uri: str) -> list[JobRecord]:
        """Jobs whose source is ``uri`` or lies under it (a folder's or a prefix's files), by id."""
        ...

    def count_jobs(self, job_ids: Iterable[int] | None = None) -> dict[JobStatus, int]:
        """How many jobs (of ``job_ids``, or all) are in each status (every status, zero included)."""
        ...

    def job_totals(self, job_ids: Iterable[int] | None = None) -> JobTotals:
        """Jobs by status, pages, batch-mode jobs and documents, by aggregate queries (any number
        of ids)."""
        ...

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
        """Claim up to ``limit`` unleased jobs in ``from_statuses`` (or jobs in ``to_status`` whose
        lease expired), urgent first, then in id order: each moves to ``to_status`` with
        attempts + 1 and a new token."""
        ...

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
        ...

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
        ...

    def renew_lease(self, lease: Lease, lease_seconds: float) -> Lease:
        """Extend a lease still held; raises LeaseLost when it was taken over or ended."""
        ...

    def renew_leases(self, leases: Sequence[Lease], lease_seconds: float) -> list[Lease]:
        """Extend every lease still held, in one statement per owner; returns the renewed leases
        (those taken over or ended are left out)."""
        ...

    def hold_jobs(
        self, worker_id: str, job_ids: Sequence[int], status: JobStatus, lease_seconds: float
    ) -> list[int]:
        """Hold jobs sitting in ``status`` for ``worker_id`` unless another holder's lease runs; the
        ids held (no token or try counted: a mark of ownership, not a claim)."""
        ...

    def requeue_unheld(self, job_id: int, from_status: JobStatus, idle_seconds: float) -> bool:
        """Back to pending a job in ``from_status`` no lease holds, unmoved for ``idle_seconds``."""
        ...

    def holds(self, lease: Lease) -> bool:
        """Whether ``lease`` still holds its job (not taken over, released or canceled)."""
        ...

    def finish_claim(self, lease: Lease, to_status: JobStatus, **fields: Any) -> None:
        """Move a claimed job on and drop the lease; raises LeaseLost for a stale owner.
        ``fields``: pages, progress, mode, attempts, error_class, error_message."""
        ...

    def holding(self, leases: Sequence[Lease]) -> set[int]:
        """The jobs of ``leases`` that their lease still holds (``holds`` of many, one statement)."""
        ...

    def finish_claims(self, leases: Sequence[Lease], to_status: JobStatus, **fields: Any) -> set[int]:
        """``finish_claim`` of many in one statement, the same ``fields`` for all; the jobs moved
        on (those whose lease was taken over or ended are left out, unchanged)."""
        ...

    def transition(
        self,
        job_id: int,
        from_statuses: Iterable[JobStatus],
        to_status: JobStatus,
        *,
        lease: Lease | None = None,
        **fields: Any,
    ) -> bool:
        """One conditional UPDATE: True when the job was in one of ``from_statuses`` and, with
        ``lease``, that lease still held it (a stale holder changes nothing). It ends any lease on
        the job (the holder's next renew/finish raises LeaseLost)."""
        ...

    def transition_jobs(
        self, job_ids: Iterable[int], from_statuses: Iterable[JobStatus], to_status: JobStatus, **fields: Any
    ) -> set[int]:
        """``transition`` of many jobs (no lease) in one conditional UPDATE per slice of ids: the
        ids of those that were in one of ``from_statuses``, and so moved."""
        ...

    def fail_job(
        self, job_id: int, phase: str, error_class: str, message: str, *, lease: Lease | None = None
    ) -> bool:
        """Mark a non-terminal job failed, with its reason recorded in errors; False if it was
        already terminal. With ``lease``, only while that lease holds (else LeaseLost)."""
        ...

    def set_progress(self, progress: Mapping[int, float]) -> None:
        """Write each job's progress (0..1)."""
        ...

    def reopen_job(self, job_id: int) -> bool:
        """A failed job goes back to pending with a fresh budget (its answers kept); False if it
        was not failed."""
        ...


class ChunkStates(Protocol):
    """A job's chunks: the requests, their results, their tokens and expected cost."""

    def save_chunks(self, job_id: int, chunks: Sequence[ChunkRecord]) -> None:
        """Upsert a job's chunks by (job, n); never deletes. A chunk that succeeded under the same
        processing key keeps its answer and usage."""
        ...

    def record_prepared(self, chunks: Sequence[ChunkRecord], finished: Sequence[Lease]) -> list[Lease]:
        """Save prepared chunks (of any jobs) and move the jobs of ``finished`` to prepared, in one
        transaction; the leases that still held (the others' jobs are left as they are)."""
        ...

    def get_chunks(self, job_id: int) -> list[ChunkRecord]:
        """A job's chunks in order of n."""
        ...

    def chunks_of(self, job_ids: Iterable[int]) -> dict[int, list[ChunkRecord]]:
        """The chunks of each of these jobs, in order of n (a job without chunks: an empty list)."""
        ...

    def chunk_counts(self, job_ids: Iterable[int] | None = None) -> dict[int, dict[ChunkStatus, int]]:
        """For each job with chunks: how many are in each status (zeros included)."""
        ...

    def chunk_progress(self, job_ids: Iterable[int]) -> dict[int, ChunkProgress]:
        """For each of these jobs with chunks: what its progress is made of (see ChunkProgress)."""
        ...

    def mark_chunks_submitted(self, custom_ids: Sequence[str], batch_id: str) -> int:
        """Prepared or retrying chunks are now in ``batch_id`` (Anthropic's id, or a sync-call
        tag); returns how many moved."""
        ...

    def release_chunks(self, batch_id: str, custom_ids: Sequence[str] | None = None) -> int:
        """Chunks still submitted in ``batch_id`` go back to prepared without counting a try."""
        ...

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
        """File one result for a chunk SUBMITTED in ``batch_id``; False (nothing changed) for a
        duplicate, a stale batch, or an unknown custom_id. Errors with ``retry`` go to RETRY until
        ``max_attempts`` tries failed, then FAILED; without ``retry`` straight to FAILED."""
        ...

    def file_results(
        self, batch_id: str, results: Sequence[ChunkResult], *, max_attempts: int = 3
    ) -> set[str]:
        """``file_result`` of each of ``results`` (of one batch, or one sync tag) in one transaction,
        a few statements per slice of them: the custom_ids filed. The first of two results for one
        custom_id is filed, as one after the other would be."""
        ...

    def usage_totals(self, job_id: int | None = None) -> Usage:
        """Token sums over all chunks, or one job's."""
        ...

    def submitted_chunk_ids(self, batch_id: str) -> list[str]:
        """custom_ids of the chunks still submitted in ``batch_id``."""
        ...

    def release_stranded_chunks(self, tags: Sequence[str] = ()) -> int:
        """Chunks submitted in a batch no longer in flight go to RETRY (no try counted); chunks
        carrying one of ``tags`` are left alone. Returns how many."""
        ...

    def unsettled_jobs(self) -> list[int]:
        """Submitted jobs with no chunk in flight, and prepared jobs with nothing left to send."""
        ...

    def request_totals_by_job(self, job_ids: Iterable[int]) -> dict[int, RequestTotals]:
        """``request_totals([job])`` of each of these jobs, by job, in one statement."""
        ...

    def request_totals(self, job_ids: Iterable[int] | None = None) -> RequestTotals:
        """Tokens by sent mode and answer origins over all chunks, or those of ``job_ids``."""
        ...

    def answers_for(self, keys: Sequence[str]) -> dict[str, ChunkRecord]:
        """A succeeded chunk for each of ``keys`` that has one: answers already held, by key."""
        ...

    def record_sent(self, sent: Mapping[str, tuple[ProcessingMode, float]]) -> None:
        """Chunks about to be sent: custom_id → (mode, expected cost in US dollars); stamped now."""
        ...

    def spend_since(
        self, since: datetime, run: str | None = None
    ) -> tuple[float, dict[ProcessingMode, Usage]]:
        """Expected cost of requests sent since ``since`` still in flight, and the tokens of those
        answered by sent mode; with ``run``, only those of the jobs that run's cap governs."""
        ...


class BatchStates(Protocol):
    """Batch intents and the Message Batches they became."""

    def record_batch_intent(
        self, custom_ids: Sequence[str], request_bytes: int, created_by: str | None = None
    ) -> int:
        """Record a batch of these requests in status CREATING, before creating it, by coordinator
        ``created_by``; its id. IntentConflict when one is held by another CREATING intent or no
        longer waits to be sent (a database rule: two intents never hold one request)."""
        ...

    def attach_batch(
        self, intent_id: int, anthropic_id: str, status: BatchStatus, raw: str, *, adopted: bool = False
    ) -> bool:
        """The intent was created as ``anthropic_id``: record it and mark its prepared/retrying
        chunks submitted in it, atomically; True when recorded. PermanentError if attached to
        another id; IntentConflict (nothing changed) when one of its requests is in another batch.
        ``adopted`` (found by listing, not returned by our create): False, nothing changed, when
        another intent holds that batch; a create's own batch is taken back from an intent that
        adopted it, which goes back to CREATING."""
        ...

    def mark_batch_lost(self, intent_id: int) -> int:
        """The batch will bring no (more) results: LOST, its chunks still SUBMITTED in it go to
        RETRY; returns how many."""
        ...

    def get_batch(self, intent_id: int) -> BatchRecord:
        """One batch by our id; KeyError when there is none."""
        ...

    def active_batches(self) -> list[BatchRecord]:
        """Batches creating, in progress, canceling or unknown, oldest first."""
        ...

    def batch_chunks(self, intent_id: int) -> list[str]:
        """The custom_ids a batch (or its intent) carries, sorted."""
        ...

    def batch_jobs(self, intent_id: int) -> list[int]:
        """The jobs with chunks in a batch."""
        ...

    def known_batch_ids(self) -> set[str]:
        """Every Anthropic batch id recorded."""
        ...

    def intent_chunk_ids(self) -> set[str]:
        """custom_ids held by batch intents still CREATING (not to be sent again meanwhile)."""
        ...

    def update_batch(
        self, anthropic_id: str, status: BatchStatus, counts: Mapping[str, int], raw: str
    ) -> bool:
        """Record a batch's latest state (ended_at set when it ends); False for an unknown id."""
        ...


class Catalog(Protocol):
    """The documents made from jobs, and the groups they fall in."""

    def upsert_documents(self, job_id: int, documents: Sequence[DocumentRecord]) -> None:
        """Make the job's documents exactly these (by index): reruns never duplicate. Refused
        (LeaseLost) once the job is canceled."""
        ...

    def upsert_documents_of(self, documents: Mapping[int, Sequence[DocumentRecord]]) -> set[int]:
        """``upsert_documents`` of several jobs (job id → its documents) in a few statements; the
        jobs refused because they were canceled (none of their rows written; the others are)."""
        ...

    def delete_documents(self, job_id: int) -> int:
        """Remove a job's document rows (a canceled job's outputs); how many went."""
        ...

    def list_documents(self, job_id: int | None = None) -> list[DocumentRecord]:
        """Documents in (job, index) order, optionally of one job."""
        ...

    def group_spellings(
        self, fields: Sequence[str] = ("counterparty", "reference")
    ) -> list[tuple[str, tuple[str, ...]]]:
        """(group key, the values of ``fields``) of documents already grouped: known groups."""
        ...

    def put_classes_file(self, sha256: str, name: str, text: str, canonical: str) -> None:
        """Keep a classes file jobs are written under, by its sha256 (a second put changes nothing)."""
        ...

    def get_classes_file(self, sha256: str) -> tuple[str, str, str] | None:
        """(name, text, canonical) of a kept classes file, or None."""
        ...

    def upsert_group(self, key: str, label: str) -> None:
        """Create the group ``key`` or update its label."""
        ...

    def upsert_groups(self, labels: Mapping[str, str]) -> None:
        """``upsert_group`` of each key → label, in one statement."""
        ...

    def list_groups(self) -> dict[str, str]:
        """Every group's key and label."""
        ...


class ErrorLog(Protocol):
    """Classified failures, kept for the report."""

    def record_error(self, job_id: int | None, phase: str, error_class: str, message: str) -> None:
        """Log one classified failure (no secrets or page text in ``message``)."""
        ...

    def list_errors(self, job_id: int | None = None) -> list[ErrorRecord]:
        """Logged failures, oldest first, optionally of one job."""
        ...


class Flags(Protocol):
    """The database's own records: its identity, the pause flag and stored settings."""

    def database_id(self) -> str:
        """This database's identity (made on first use): keeps its outputs apart from others'."""
        ...

    def is_paused(self) -> bool:
        """Whether the pause flag is set."""
        ...

    def set_paused(self, paused: bool) -> None:
        """Set or clear the pause flag."""
        ...

    def get_flags(self, prefix: str) -> dict[str, str]:
        """Every stored setting whose key starts with ``prefix`` (the spend cap keeps its own)."""
        ...

    def set_flags(self, values: Mapping[str, str | None]) -> None:
        """Store settings by key; None removes one."""
        ...


class Coordinators(Protocol):
    """Coordinator heartbeats: who is alive, who leads, and the work a stopped one left."""

    def beat(self, coordinator_id: str, lease_seconds: float) -> bool:
        """Record a coordinator alive for ``lease_seconds``; True while it holds the lead. The newest
        live coordinator leads: an older one gives the lead up once it sees a newer one beat."""
        ...

    def retire(self, coordinator_id: str) -> None:
        """A coordinator that stops gives up its heartbeat and its lead."""
        ...

    def take_lease(self, name: str, holder: str, lease_seconds: float) -> bool:
        """Take or renew a named lease for ``lease_seconds``; False while another holder has it."""
        ...

    def give_up_lease(self, name: str, holder: str) -> None:
        """Let a named lease go, if ``holder`` has it."""
        ...

    def live_coordinators(self) -> list[str]:
        """The coordinators that beat within their lease, oldest first."""
        ...

    def release_orphaned_sync_chunks(self) -> int:
        """Chunks of synchronous calls whose coordinator stopped beating go back to prepared."""
        ...


@dataclass(frozen=True)
class JobProgress:
    """A job's status and progress: what the console polls while a run goes on."""

    id: int
    status: JobStatus
    progress: float
    pages: int | None


@dataclass(frozen=True)
class DocumentQuery:
    """What the console's documents page searches by (empty: any): class, a text found in a field
    (title, number, counterparty, reference), group, and the document's date from/to (ISO)."""

    doc_type: str = ""
    text: str = ""
    group_key: str = ""
    date_from: str = ""
    date_to: str = ""


@dataclass(frozen=True)
class FoundDocument:
    """A document found by ``page_documents``, with its row id (the page's keyset)."""

    row_id: int
    document: DocumentRecord


@dataclass(frozen=True)
class GroupCount:
    """A group, its label and how many documents are in it."""

    key: str
    label: str
    documents: int


@dataclass(frozen=True)
class ConsoleUser:
    """One console user: name, role and an argon2 hash of the password (never the password)."""

    name: str
    role: ConsoleRole
    password_hash: str


class ConsoleReads(Protocol):
    """Read-only pages for the console, by keyset (``id < before ORDER BY id DESC LIMIT n``), so a
    million rows page as fast as a thousand."""

    def page_jobs(
        self,
        statuses: Iterable[JobStatus] = (),
        *,
        search: str = "",
        before: int | None = None,
        limit: int = 50,
    ) -> list[JobRecord]:
        """Up to ``limit`` jobs with an id below ``before``, newest first, optionally only those in
        ``statuses`` or whose file name contains ``search``."""
        ...

    def job_progress(self, job_ids: Iterable[int]) -> list[JobProgress]:
        """Status and progress of each of these jobs that exists, in id order."""
        ...

    def page_documents(
        self, query: DocumentQuery, *, before: int | None = None, limit: int = 50
    ) -> list[FoundDocument]:
        """Up to ``limit`` documents matching ``query`` with a row id below ``before``, newest first."""
        ...

    def get_document(self, job_id: int, index: int) -> DocumentRecord:
        """One document of a job; KeyError when there is none."""
        ...

    def document_classes(self) -> list[str]:
        """The classes documents have, sorted."""
        ...

    def page_groups(self, *, search: str = "", limit: int = 200) -> list[GroupCount]:
        """Up to ``limit`` groups (key or label containing ``search``) with their document counts, by key."""
        ...


class ConsoleUsers(Protocol):
    """The console's users (a login is configured once one exists)."""

    def put_console_user(self, name: str, role: ConsoleRole, password_hash: str) -> None:
        """Add a user, or replace the role and password hash of one."""
        ...

    def get_console_user(self, name: str) -> ConsoleUser | None:
        """The user of this name, or None."""
        ...

    def list_console_users(self) -> list[ConsoleUser]:
        """Every user, by name."""
        ...


class Reviews(Protocol):
    """The corrections ledger, previous document versions and the review queue (raybatch.review)."""

    def record_correction(
        self,
        correction: Correction,
        expected: Mapping[int, int | None],
        documents: Sequence[DocumentRecord],
        removed: Sequence[int] = (),
    ) -> tuple[CorrectionRecord, bool]:
        """Apply a correction in one transaction: (its record, whether it changed anything). An
        idempotency key seen before changes nothing; a version not as ``expected``: ReviewConflict."""
        ...

    def redo_job(
        self,
        job_id: int,
        chunk_ns: Sequence[int],
        *,
        fresh: bool = False,
        pages: tuple[int, int] | None = None,
    ) -> bool:
        """A completed job back to pending with these chunks' answers cleared (``raybatch redo``)."""
        ...

    def get_correction(self, key: str) -> CorrectionRecord | None:
        """The correction applied under idempotency ``key``, if any."""
        ...

    def list_corrections(self, job_id: int | None = None) -> list[CorrectionRecord]:
        """Applied corrections, oldest first, optionally of one job."""
        ...

    def document_versions(self, job_id: int, index: int | None = None) -> list[DocumentVersion]:
        """A job's previous document versions (rows and object keys as they were)."""
        ...

    def versions_of(self, job_ids: Iterable[int]) -> dict[int, list[DocumentVersion]]:
        """``document_versions`` of each of these jobs, by job, in one statement."""
        ...

    def highest_versions(self, job_id: int) -> dict[int, int]:
        """The highest version each index of a job has had, current or previous."""
        ...

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
        """Current documents in one of these review states (of a class, with a reason code), in
        (job, index) order after ``after``, or the nearest first before ``before``; ``limit`` of them."""
        ...

    def count_in_review(
        self,
        states: Sequence[str],
        *,
        doc_type: str | None = None,
        reason: str | None = None,
        after: tuple[int, int] | None = None,
    ) -> int:
        """How many documents ``documents_in_review`` would give (counted, none loaded)."""
        ...

    def review_totals(self, job_ids: Sequence[int] | None = None) -> dict[str, int]:
        """Current documents by review state, of ``job_ids`` or all (counted, none loaded)."""
        ...

    def review_totals_by_job(self, job_ids: Sequence[int]) -> dict[int, dict[str, int]]:
        """Each job's current documents by review state (jobs with no document left out)."""
        ...

    def reviewed_layout(self, sha256: str) -> list[DocumentRecord]:
        """The current documents of the newest job of this source with a reviewed document."""
        ...

    def reviewed_layouts(self, sha256s: Iterable[str]) -> dict[str, list[DocumentRecord]]:
        """``reviewed_layout`` of each of these sources, by sha256, in two statements."""
        ...


class JobsWithChunks(JobStates, ChunkStates, Protocol):
    """Jobs and their chunks: what settles, reuses or reprioritises a job by its chunks."""


class PageTexts(PageTextCache, PageTextLookup, Protocol):
    """The OCR cache (``page_ocr``): texts by source, page and engine."""

    def put_page_texts(self, reads: Sequence[tuple[str, CachedPage]]) -> None:
        """Cache many pages' texts (each with its source's sha256) together; a later put replaces."""
        ...


class StateStore(
    JobStates,
    ChunkStates,
    BatchStates,
    Catalog,
    PageTexts,
    ErrorLog,
    Flags,
    Coordinators,
    ConsoleReads,
    ConsoleUsers,
    Reviews,
    Protocol,
):
    """The whole store: every slice, for the callers that need them all (one database)."""

    def close(self) -> None:
        """Release connections; the store reconnects if used again."""
        ...
