"""What the review queue page needs from the review ledger: a small interface, and a fake.

The console draws the queue and turns keys into corrections; the ledger (``raybatch.review``)
decides what is pending and writes each correction as a new document version. ``ReviewPort`` is
all the console asks of it; ``MemoryReviewPort`` is the fake the tests (and a console without a
ledger) use: it keeps its corrections in memory and rewrites the documents' rows so the change
shows on every page.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

from raybatch.models import DOCUMENT_FIELDS, DocumentRecord
from raybatch.state.port import Catalog, ConsoleReads


class CorrectionKind(StrEnum):
    """What a reviewer did to a document (the keys: a, c, e, s, m)."""

    ACCEPT = "accept"
    SET_CLASS = "set_class"
    SET_FIELD = "set_field"
    SPLIT = "split"
    MERGE = "merge"


@dataclass(frozen=True)
class DocumentKey:
    """One document: its job and its index in the job."""

    job_id: int
    index: int


@dataclass(frozen=True)
class PendingDocument:
    """A document waiting for a person: which one, the version seen, and why it waits."""

    key: DocumentKey
    version: int = 1
    confidence: float | None = None
    reasons: Sequence[str] = ()


@dataclass(frozen=True)
class Correction:
    """One change asked for in the console. ``reviewer`` is the logged-in user; ``version`` the
    version the reviewer saw (a ledger refuses a correction to a version no longer current).
    ``name``/``value``: the field and its new value (SET_FIELD), the class (SET_CLASS, in
    ``value``); ``page``: the first page of the second part (SPLIT)."""

    kind: CorrectionKind
    key: DocumentKey
    version: int
    reviewer: str
    name: str = ""
    value: str = ""
    page: int | None = None


@dataclass(frozen=True)
class Applied:
    """What a correction did: its ledger id, a line to show, and the document to show next."""

    correction_id: int
    message: str
    key: DocumentKey


class ReviewRefused(ValueError):
    """A correction the ledger will not apply (a stale version, a page outside the document, no
    next document to merge with): its message is shown to the reviewer."""


class ReviewPort(Protocol):
    """The review ledger as the console uses it."""

    def pending_count(self) -> int:
        """How many documents wait for review."""
        ...

    def next_pending(self, after: DocumentKey | None = None) -> PendingDocument | None:
        """The first pending document after ``after`` (in (job, index) order), or the first one."""
        ...

    def previous_pending(self, before: DocumentKey) -> PendingDocument | None:
        """The last pending document before ``before``, or None."""
        ...

    def pending(self, key: DocumentKey) -> PendingDocument | None:
        """This document if it waits for review, else None."""
        ...

    def classes(self) -> list[str]:
        """The classes a document may be given."""
        ...

    def apply(self, correction: Correction) -> Applied:
        """Record ``correction`` and write the documents it makes; ReviewRefused if it cannot."""
        ...


class ReviewState(Catalog, ConsoleReads, Protocol):
    """The slices of the state store the fake ledger reads and rewrites."""


@dataclass
class MemoryReviewPort:
    """The fake ledger: pending documents and corrections in memory, documents' rows rewritten in
    the state store (as the real ledger's new versions would show)."""

    state: ReviewState
    waiting: set[DocumentKey] = field(default_factory=set)
    known_classes: list[str] = field(default_factory=list)
    corrections: list[Correction] = field(default_factory=list)
    versions: dict[DocumentKey, int] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def pending_count(self) -> int:
        return len(self.waiting)

    def next_pending(self, after: DocumentKey | None = None) -> PendingDocument | None:
        keys = sorted(self.waiting, key=_order)
        later = [k for k in keys if after is None or _order(k) > _order(after)]
        return self._pending(later[0]) if later else None

    def previous_pending(self, before: DocumentKey) -> PendingDocument | None:
        earlier = [k for k in sorted(self.waiting, key=_order) if _order(k) < _order(before)]
        return self._pending(earlier[-1]) if earlier else None

    def pending(self, key: DocumentKey) -> PendingDocument | None:
        return self._pending(key) if key in self.waiting else None

    def classes(self) -> list[str]:
        return sorted(set(self.known_classes) | set(self.state.document_classes()))

    def apply(self, correction: Correction) -> Applied:
        key = correction.key
        if correction.version != self.versions.get(key, 1):
            raise ReviewRefused(f"document {key.index} of job {key.job_id} changed since it was shown")
        documents = self.state.list_documents(key.job_id)
        position = next((i for i, d in enumerate(documents) if d.index == key.index), None)
        if position is None:
            raise ReviewRefused(f"no document {key.index} in job {key.job_id}")
        changed, message = _corrected(documents, position, correction)
        self.state.upsert_documents(key.job_id, _reindexed(changed, documents[0].index))
        self.corrections.append(correction)
        self._settle(key, correction.kind, len(changed) - len(documents))
        return Applied(next(self._ids), message, key)

    def _settle(self, key: DocumentKey, kind: CorrectionKind, added: int) -> None:
        """The queue after a correction: the document is settled; a split or merge shifts the
        indexes of the job's later documents."""
        self.waiting.discard(key)
        self.versions[key] = self.versions.get(key, 1) + 1
        if added:
            shifted = {k for k in self.waiting if k.job_id == key.job_id and k.index > key.index}
            self.waiting -= shifted
            self.waiting |= {DocumentKey(k.job_id, k.index + added) for k in shifted}
            if kind is CorrectionKind.MERGE:
                self.waiting.discard(DocumentKey(key.job_id, key.index + 1))

    def _pending(self, key: DocumentKey) -> PendingDocument:
        try:
            doc: DocumentRecord | None = self.state.get_document(key.job_id, key.index)
        except KeyError:
            doc = None
        confidence = doc.confidence if doc else None
        reasons = tuple(doc.review_reasons) if doc else ()
        return PendingDocument(key, self.versions.get(key, 1), confidence, reasons)


def _order(key: DocumentKey) -> tuple[int, int]:
    return (key.job_id, key.index)


def _corrected(
    documents: list[DocumentRecord], at: int, correction: Correction
) -> tuple[list[DocumentRecord], str]:
    """The job's documents after ``correction`` to the one at position ``at``, and what it did."""
    doc, kind, stamp = (
        documents[at],
        correction.kind,
        {"reviewed_by": correction.reviewer, "reviewed_at": _now()},
    )
    reviewed = replace(doc, extra={**doc.extra, **stamp})
    if kind is CorrectionKind.ACCEPT:
        return [*documents[:at], reviewed, *documents[at + 1 :]], f"accepted document {doc.index}"
    if kind is CorrectionKind.SET_CLASS:
        return [*documents[:at], replace(reviewed, doc_type=correction.value), *documents[at + 1 :]], (
            f"document {doc.index} is now {correction.value}"
        )
    if kind is CorrectionKind.SET_FIELD:
        return [*documents[:at], _with_field(reviewed, correction), *documents[at + 1 :]], (
            f"{correction.name} of document {doc.index} set"
        )
    if kind is CorrectionKind.SPLIT:
        return _split(documents, at, reviewed, correction.page)
    return _merge(documents, at, reviewed)


def _with_field(doc: DocumentRecord, correction: Correction) -> DocumentRecord:
    spec = next((f for f in DOCUMENT_FIELDS if f.name == correction.name), None)
    if spec is None:
        return replace(doc, fields={**doc.fields, correction.name: correction.value})
    value: Any = correction.value or None
    if spec.kind is float and value is not None:
        try:
            value = float(value)
        except ValueError:
            raise ReviewRefused(f"{spec.name} {correction.value!r} is not a number") from None
    return replace(doc, values={**doc.values, spec.name: value})


def _split(
    documents: list[DocumentRecord], at: int, doc: DocumentRecord, page: int | None
) -> tuple[list[DocumentRecord], str]:
    if page is None or not doc.first_page < page <= doc.last_page:
        raise ReviewRefused(
            f"a split of pages {doc.first_page}-{doc.last_page} starts its second part inside them"
        )
    first = replace(doc, last_page=page - 1, pdf_key=None, thumb_key=None)
    second = replace(doc, first_page=page, pdf_key=None, thumb_key=None)
    return [
        *documents[:at],
        first,
        second,
        *documents[at + 1 :],
    ], f"document {doc.index} split before page {page}"


def _merge(documents: list[DocumentRecord], at: int, doc: DocumentRecord) -> tuple[list[DocumentRecord], str]:
    if at + 1 >= len(documents):
        raise ReviewRefused(f"document {doc.index} is the job's last: nothing to merge it with")
    after = documents[at + 1]
    merged = replace(doc, last_page=after.last_page, pdf_key=None, thumb_key=None)
    return [*documents[:at], merged, *documents[at + 2 :]], f"documents {doc.index} and {after.index} merged"


def _reindexed(documents: list[DocumentRecord], start: int) -> list[DocumentRecord]:
    return [replace(d, index=start + i) for i, d in enumerate(documents)]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
