"""Statuses and the plain records that cross layers (state rows, prepared pages, results).

Pages are numbered from 1, as a reader counts them, everywhere outside PyMuPDF calls.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from dataclasses import fields as declared_fields
from datetime import datetime
from enum import StrEnum
from typing import Any, get_args, get_type_hints

log = logging.getLogger(__name__)


class JobStatus(StrEnum):
    """A job's life: pending → preparing → prepared → submitted → answered → writing → completed,
    or failed / canceled from any status before completed."""

    PENDING = "pending"
    PREPARING = "preparing"
    PREPARED = "prepared"
    SUBMITTED = "submitted"
    ANSWERED = "answered"
    WRITING = "writing"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_JOB_STATUSES


TERMINAL_JOB_STATUSES = frozenset({JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELED})


class ProcessingMode(StrEnum):
    """How chunks reach Claude: the Batch API (half price) or synchronous Messages calls."""

    BATCH = "batch"
    SYNC = "sync"


class Priority(StrEnum):
    """Which queue a job is in: urgent jobs are sent synchronously and taken first everywhere."""

    URGENT = "urgent"
    NORMAL = "normal"


def priority_of(value: object) -> Priority:
    """A priority from any value: ``urgent`` or ``normal``; anything else counts as normal, with a
    warning (as the services this replaces did)."""
    text = str(value or "").strip().lower()
    if text in (Priority.URGENT.value, Priority.NORMAL.value):
        return Priority(text)
    log.warning("unknown priority %r: taken as normal", value)
    return Priority.NORMAL


def mode_for(priority: Priority, default_mode: ProcessingMode) -> ProcessingMode:
    """How a job's requests reach Claude: urgent ones synchronously, others by the default."""
    return ProcessingMode.SYNC if priority is Priority.URGENT else default_mode


SYNC_BATCH_ID = "sync"  # the batch id chunks carry while a synchronous call is under way


def sync_tag(coordinator_id: str) -> str:
    """The batch id a coordinator's synchronous calls give their chunks."""
    return f"{SYNC_BATCH_ID}:{coordinator_id}"


def is_sync_tag(batch_id: str | None) -> bool:
    """Whether a chunk's batch id is a synchronous call's (any coordinator's)."""
    return batch_id is not None and (batch_id == SYNC_BATCH_ID or batch_id.startswith(f"{SYNC_BATCH_ID}:"))


def sent_mode_of(batch_id: str | None) -> ProcessingMode:
    """How a request whose chunk carries ``batch_id`` was sent."""
    return ProcessingMode.SYNC if is_sync_tag(batch_id) else ProcessingMode.BATCH


class ChunkStatus(StrEnum):
    """A chunk (one Claude request): prepared → submitted → succeeded | retry → … | failed."""

    PREPARED = "prepared"
    SUBMITTED = "submitted"
    SUCCEEDED = "succeeded"
    RETRY = "retry"
    FAILED = "failed"


class BatchStatus(StrEnum):
    """Our view of a Message Batch. ``creating`` is the intent recorded before the create call."""

    CREATING = "creating"
    IN_PROGRESS = "in_progress"
    CANCELING = "canceling"
    ENDED = "ended"
    LOST = "lost"
    UNKNOWN = "unknown"


class ResultType(StrEnum):
    """The outcome of one request in a batch (or one synchronous call)."""

    SUCCEEDED = "succeeded"
    ERRORED = "errored"
    EXPIRED = "expired"
    CANCELED = "canceled"


class SourceKind(StrEnum):
    """What a source file is."""

    PDF = "pdf"
    IMAGE = "image"


@dataclass(frozen=True)
class JobRecord:
    """One source file and where it stands."""

    id: int
    sha256: str
    source_uri: str
    source_name: str
    kind: SourceKind
    size_bytes: int
    status: JobStatus
    mode: ProcessingMode = ProcessingMode.BATCH
    priority: Priority = Priority.NORMAL
    pages: int | None = None
    progress: float = 0.0
    attempts: int = 0
    error_class: str | None = None
    error_message: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    held_until: datetime | None = None  # while a lease on it runs
    classes_sha: str | None = None  # the classes file its documents were written under


@dataclass(frozen=True)
class Lease:
    """Ownership of a job for a while. ``token`` grows on every claim and fences stale owners."""

    job_id: int
    worker_id: str
    token: int
    expires_at: datetime
    attempt: int


class TextSource(StrEnum):
    """Where a page's text came from: its text layer, an OCR engine, or nowhere."""

    LAYER = "layer"
    OCR = "ocr"
    NONE = "none"


def ocr_origin(engine: str) -> str:
    """The origin of text an OCR engine read: ``ocr:<engine's name and version>``."""
    return f"{TextSource.OCR}:{engine}"


@dataclass(frozen=True)
class PageText:
    """The text of one page and where it came from: a ``TextSource``, or ``ocr_origin(engine)``."""

    page: int
    text: str
    origin: str
    confidence: float = 1.0
    rotation: int = 0  # clockwise degrees that make the page upright: 0, 90, 180 or 270

    @property
    def source(self) -> TextSource:
        """Where the text came from, without the OCR engine's name."""
        return TextSource(self.origin.split(":", 1)[0])


@dataclass(frozen=True)
class CachedPage:
    """One page's text as one OCR engine (name and version) read it."""

    engine: str
    text: PageText


@dataclass(frozen=True)
class RenderedPage:
    """A page made ready for Claude: its text, and an image no longer than the long-edge limit when
    the page goes with its image (``image`` is None for a page sent as its text alone)."""

    page: int
    image: bytes | None
    media_type: str
    width: int
    height: int
    text: PageText


@dataclass(frozen=True)
class ChunkRecord:
    """One chunk of a job as the state store keeps it."""

    job_id: int
    n: int
    first_page: int
    last_page: int
    custom_id: str
    processing_key: str
    status: ChunkStatus
    request_bytes: int = 0
    attempts: int = 0
    batch_id: str | None = None
    answer: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    error_class: str | None = None
    error_message: str | None = None
    rotations: Mapping[int, int] = field(default_factory=dict)  # page → clockwise degrees found
    emulated: bool = False  # prepared for (and so answered by) the built-in emulator
    sent_mode: ProcessingMode | None = None  # how the request was last sent
    sent_at: datetime | None = None
    estimated_cost_usd: float | None = None  # expected cost when it was sent
    reused_from: str | None = None  # the custom_id whose answer this chunk took instead of a request

    @property
    def usage(self) -> Usage:
        """The chunk's token usage."""
        tokens = (self.input_tokens, self.output_tokens, self.cache_read_tokens, self.cache_creation_tokens)
        return Usage(*tokens)


@dataclass(frozen=True)
class Usage:
    """Token usage of one request."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0


def _declared(description: str, *, length: int | None = None) -> Any:
    """A document field, None until found: ``description`` is for Claude, ``length`` bounds its text."""
    return field(default=None, metadata={"description": description, "length": length})


@dataclass(frozen=True, kw_only=True)
class DocumentFields:
    """The fields of the shipped default classes file (``raybatch/classes/default.yaml``), as the
    sample corpus and the emulator's default rules write them. Everything else (schema, prompt,
    stitching, rows, tables, manifest) derives the fields from the classes file in use."""

    title: str | None = _declared("the heading as printed")
    date: str | None = _declared("the document's own date, ISO 8601 yyyy-mm-dd")
    number: str | None = _declared("the document's own number, as printed, without '№' or 'No.'")
    counterparty: str | None = _declared("the other party's name, as printed")
    amount: float | None = _declared("the total amount, as a plain number")
    currency: str | None = _declared("ISO 4217 code, e.g. RUB, USD, EUR", length=16)
    reference: str | None = _declared("the contract or deal number this document belongs to")


@dataclass(frozen=True)
class DocumentField:
    """One declared document field: its name, the type of its value (it may also be null), what it
    means to Claude, and the longest text the state table keeps (None: unbounded)."""

    name: str
    kind: type[str] | type[float]
    description: str
    length: int | None = None


def _declarations() -> tuple[DocumentField, ...]:
    hints = get_type_hints(DocumentFields)
    return tuple(
        DocumentField(spec.name, _value_type(hints[spec.name]), **spec.metadata)
        for spec in declared_fields(DocumentFields)
    )


def _value_type(hint: Any) -> type[str] | type[float]:
    (kind,) = (arg for arg in get_args(hint) if arg is not type(None))
    if kind not in (str, float):
        raise TypeError(f"a document field holds str or float, not {kind!r}")
    return kind


DOCUMENT_FIELDS = _declarations()


def field_values(document: object) -> dict[str, Any]:
    """The declared fields of a document (found in an answer, stitched or stored), by name."""
    return {spec.name: getattr(document, spec.name) for spec in DOCUMENT_FIELDS}


class ReviewState(StrEnum):
    """Whether a document waits for a person: not needed (sure enough), pending, or reviewed."""

    NONE = "none"
    PENDING = "pending"
    ACCEPTED = "accepted"
    CORRECTED = "corrected"

    @property
    def reviewed(self) -> bool:
        """A person has seen it: no model answer replaces it any more."""
        return self in (ReviewState.ACCEPTED, ReviewState.CORRECTED)


# A job's error_class while ``raybatch redo`` asks Claude again for some of its chunks (``fresh``:
# past the answer cache); its writer writes the new answer as new versions and clears it.
REDO, REDO_FRESH = "redo", "redo:fresh"


class DefaultFieldNames:
    """The default file's seven fields as attributes, read from ``values``: for code written
    before classes files (under any other file they are None)."""

    values: Mapping[str, Any]

    title = property(lambda self: self.values.get("title"))
    date = property(lambda self: self.values.get("date"))
    number = property(lambda self: self.values.get("number"))
    counterparty = property(lambda self: self.values.get("counterparty"))
    amount = property(lambda self: self.values.get("amount"))
    currency = property(lambda self: self.values.get("currency"))
    reference = property(lambda self: self.values.get("reference"))


@dataclass(frozen=True)
class DocumentRecord(DefaultFieldNames):
    """One document found in a job: its pages, class, values (the classes file's fields), the
    problems its values had, and object keys."""

    job_id: int
    index: int
    first_page: int
    last_page: int
    doc_type: str
    fields: dict[str, str] = field(default_factory=dict)  # other name/value pairs Claude found
    group_key: str | None = None
    pdf_key: str | None = None
    thumb_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)  # the declared fields, checked, by name
    # (field, reason) for each value not of its type, format or enum (kept as text), or missing
    problems: tuple[tuple[str, str], ...] = ()
    repaired: bool = False  # some answer it came from needed its text repaired to parse
    # raybatch.review: each correction makes a new version; the score, its reasons, the review state
    version: int = 1
    confidence: float | None = None
    review: str = ReviewState.NONE.value
    review_reasons: list[str] = field(default_factory=list)
    field_confidence: dict[str, float] = field(default_factory=dict)
    text_key: str | None = None  # its text as an object: the text layer, else the OCR's


@dataclass(frozen=True)
class Correction:
    """One correction a reviewer asks for, before it is applied: ``kind`` is accept, set, split, merge,
    move or redo; ``change`` what it changes; ``key`` makes applying it twice a no-op."""

    job_id: int
    index: int
    base_version: int  # the version of the document the reviewer saw
    kind: str
    reviewer: str
    change: Mapping[str, Any]
    key: str


@dataclass(frozen=True)
class CorrectionRecord(Correction):
    """An applied correction, as the ledger keeps it: when, and the versions it wrote."""

    id: int = 0
    created_at: datetime | None = None
    written: tuple[tuple[int, int], ...] = ()  # (index, version) of each document written
    removed: tuple[int, ...] = ()  # indexes that no longer exist after it


@dataclass(frozen=True)
class DocumentVersion:
    """A document's previous version: its row as it was, and its objects (kept, still readable)."""

    job_id: int
    index: int
    version: int
    record: DocumentRecord
    replaced_by: int | None = None  # the correction that replaced it


class ConsoleRole(StrEnum):
    """What a console user may do: read every page, or read and review (write corrections)."""

    READER = "reader"
    REVIEWER = "reviewer"
