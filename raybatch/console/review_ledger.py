"""The review queue on the real ledger: ``ReviewPort`` over ``raybatch.review``'s ``ReviewDesk``.

Each console action becomes the desk's correction of the version the reviewer saw, made by the
logged-in user: a new version written through the writer, recorded in the ledger. What the desk
refuses (a version replaced meanwhile, a page outside the document, no next document to merge
with, an unknown class) reaches the reviewer as ``ReviewRefused`` with the desk's own words.
"""

from __future__ import annotations

from dataclasses import dataclass

from raybatch.claude.answer import DocType
from raybatch.console.review_port import (
    Applied,
    Correction,
    CorrectionKind,
    DocumentKey,
    PendingDocument,
    ReviewRefused,
)
from raybatch.errors import ConfigError, ReviewConflict
from raybatch.models import DocumentRecord, ReviewState
from raybatch.review import api
from raybatch.review.api import DocRef, ReviewDesk, Reviewer


@dataclass
class LedgerReviewPort:
    """The console's review queue: the desk's pending documents, its corrections."""

    desk: ReviewDesk

    def pending_count(self) -> int:
        return self.desk.state.review_totals()[ReviewState.PENDING.value]  # counted, none loaded

    def next_pending(self, after: DocumentKey | None = None) -> PendingDocument | None:
        found = self.desk.next_pending(DocRef(after.job_id, after.index) if after else None)
        return pending_of(found) if found else None

    def previous_pending(self, before: DocumentKey) -> PendingDocument | None:
        found = self.desk.previous_pending(DocRef(before.job_id, before.index))
        return pending_of(found) if found else None

    def pending(self, key: DocumentKey) -> PendingDocument | None:
        try:
            doc = self.desk.document(DocRef(key.job_id, key.index))
        except ConfigError:
            return None
        return pending_of(doc) if doc.review == ReviewState.PENDING.value else None

    def classes(self) -> list[str]:
        return [t.value for t in DocType]

    def apply(self, correction: Correction) -> Applied:
        key = correction.key
        try:
            done = self._apply(correction)
        except ReviewConflict as exc:
            raise ReviewRefused(str(exc)) from None
        except ConfigError as exc:
            raise ReviewRefused(str(exc)) from None
        return Applied(done.correction.id, _message(correction), key)

    def _apply(self, correction: Correction) -> api.Applied:
        ref, who = DocRef(correction.key.job_id, correction.key.index), Reviewer(correction.reviewer)
        seen, kind = correction.version, correction.kind
        if kind is CorrectionKind.ACCEPT:
            return self.desk.accept(ref, who, expected_version=seen)
        if kind is CorrectionKind.SET_CLASS:
            return self.desk.set(ref, who, doc_type=correction.value, expected_version=seen)
        if kind is CorrectionKind.SET_FIELD:
            fields = {correction.name: correction.value}
            return self.desk.set(ref, who, fields=fields, expected_version=seen)
        if kind is CorrectionKind.SPLIT:
            if correction.page is None:
                raise ReviewRefused("a split needs the page that starts its second part")
            return self.desk.split(ref, correction.page, who, expected_version=seen)
        return self.desk.merge(ref, who, expected_version=seen)


def pending_of(doc: DocumentRecord) -> PendingDocument:
    """A document of the ledger as the queue shows it: its version, confidence and reasons."""
    return PendingDocument(
        DocumentKey(doc.job_id, doc.index), doc.version, doc.confidence, tuple(doc.review_reasons)
    )


def _message(correction: Correction) -> str:
    index, kind = correction.key.index, correction.kind
    if kind is CorrectionKind.ACCEPT:
        return f"accepted document {index}"
    if kind is CorrectionKind.SET_CLASS:
        return f"document {index} is now {correction.value}"
    if kind is CorrectionKind.SET_FIELD:
        return f"{correction.name} of document {index} set"
    if kind is CorrectionKind.SPLIT:
        return f"document {index} split before page {correction.page}"
    return f"documents {index} and {index + 1} merged"
