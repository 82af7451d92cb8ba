"""The review API: the queue, one document's story, and corrections applied through the writer.

What the CLI's ``raybatch review`` calls, and the web console with it: every function takes plain
values (a ``DocRef`` such as ``12:3``, a ``Reviewer``, an expected version for the conflict check)
and returns records. Applying a correction writes a new version of each document it touches
through the writer's own steps (slice, thumbnail, upload under ``<n>.v<k>`` keys, group), records
it in the ledger in one transaction, then writes the job's manifest and Parquet slice again.
"""

from __future__ import annotations

import getpass
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from raybatch.errors import ConfigError, ReviewConflict
from raybatch.models import Correction, CorrectionRecord, DocumentRecord, DocumentVersion, ReviewState
from raybatch.objects.port import ObjectStore
from raybatch.review import PAGE_SIZE
from raybatch.review.corrections import CorrectionKind, correction_key, plan_correction
from raybatch.settings import (
    Settings,
    StateSettings,
    StoreSettings,
)
from raybatch.state.port import StateStore
from raybatch.work.writer import ResultWriter

_REF = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")
_PENDING = (ReviewState.PENDING.value,)


@dataclass(frozen=True)
class DocRef:
    """A document by job and index, written ``JOB:INDEX`` as ``status --jobs`` and manifests show it."""

    job_id: int
    index: int

    @classmethod
    def parse(cls, text: str) -> DocRef:
        match = _REF.match(text)
        if match is None:
            raise ConfigError(f"{text!r} is not a document: write JOB:INDEX, e.g. 12:3")
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        return f"{self.job_id}:{self.index}"


@dataclass(frozen=True)
class Reviewer:
    """Who corrects: a name as the ledger keeps it (the OS user by default)."""

    name: str

    @classmethod
    def default(cls) -> Reviewer:
        return cls(getpass.getuser())


@dataclass(frozen=True)
class PendingPage:
    """One page of the review queue: its documents and how many more wait after them."""

    documents: list[DocumentRecord]
    more: int = 0

    @property
    def next(self) -> DocRef | None:
        """Where the next page starts (``--after``), None at the end of the queue."""
        last = self.documents[-1] if self.documents else None
        return DocRef(last.job_id, last.index) if last is not None and self.more else None


@dataclass(frozen=True)
class DocumentStory:
    """One document now, its previous versions and the corrections of its job."""

    document: DocumentRecord
    versions: list[DocumentVersion]
    corrections: list[CorrectionRecord]


@dataclass(frozen=True)
class Applied:
    """What a correction did: its ledger row, whether it changed anything now, the documents written."""

    correction: CorrectionRecord
    applied: bool
    documents: list[DocumentRecord]


class ReviewDesk:
    """Review over one database and store: list, show, correct."""

    def __init__(self, state: StateStore, store: ObjectStore, writer: ResultWriter) -> None:
        self.state = state
        self.store = store
        self._writer = writer

    @classmethod
    def open(cls, settings: Settings) -> ReviewDesk:
        """A desk on the settings' database and store."""
        from raybatch.objects import open_store
        from raybatch.state import open_state

        state = open_state(settings.section(StateSettings))
        store = open_store(settings.section(StoreSettings))
        writer = ResultWriter.of_settings(state, store, settings)
        return cls(state, store, writer)

    def pending(
        self,
        *,
        doc_type: str | None = None,
        reason: str | None = None,
        after: DocRef | None = None,
        limit: int = PAGE_SIZE,
    ) -> PendingPage:
        """A page of the documents waiting for a person, in (job, index) order after ``after``; of
        one class, or with one reason code. Its ``next`` is where the following page starts."""
        if limit < 1:
            raise ConfigError(f"a page of the review queue holds at least one document, not {limit}")
        start = (after.job_id, after.index) if after else None
        found = self.state.documents_in_review(
            _PENDING, doc_type=doc_type, reason=reason, after=start, limit=limit
        )
        if len(found) < limit:
            return PendingPage(found)
        last = (found[-1].job_id, found[-1].index)
        return PendingPage(
            found, self.state.count_in_review(_PENDING, doc_type=doc_type, reason=reason, after=last)
        )

    def next_pending(self, after: DocRef | None = None) -> DocumentRecord | None:
        """The first pending document after ``after`` (or the first of all), None when none waits."""
        start = (after.job_id, after.index) if after else None
        found = self.state.documents_in_review(_PENDING, after=start, limit=1)
        return found[0] if found else None

    def previous_pending(self, before: DocRef) -> DocumentRecord | None:
        """The last pending document before ``before``, None when none waits there."""
        found = self.state.documents_in_review(_PENDING, before=(before.job_id, before.index), limit=1)
        return found[0] if found else None

    def document(self, ref: DocRef) -> DocumentRecord:
        """The current version of one document; ConfigError when there is none."""
        for doc in self.state.list_documents(ref.job_id):
            if doc.index == ref.index:
                return doc
        raise ConfigError(f"no document {ref}")

    def show(self, ref: DocRef) -> DocumentStory:
        """One document, its previous versions (rows and object keys) and its job's corrections."""
        return DocumentStory(
            self.document(ref),
            self.state.document_versions(ref.job_id, ref.index),
            self.state.list_corrections(ref.job_id),
        )

    def accept(self, ref: DocRef, reviewer: Reviewer, *, expected_version: int | None = None) -> Applied:
        """The document is right as it is."""
        return self.apply(ref, CorrectionKind.ACCEPT, {}, reviewer, expected_version=expected_version)

    def set(
        self,
        ref: DocRef,
        reviewer: Reviewer,
        *,
        doc_type: str | None = None,
        fields: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
    ) -> Applied:
        """Change its class and/or fields (an empty value clears a field)."""
        classes = sorted(self._writer.classes.classes)
        if doc_type and doc_type not in classes:
            raise ConfigError(f"unknown class {doc_type!r}: one of {', '.join(classes)}")
        change: dict[str, Any] = {"doc_type": doc_type} if doc_type else {}
        if fields:
            change["fields"] = dict(fields)
        if not change:
            raise ConfigError("review set: give --type CLASS or --field NAME=VALUE")
        return self.apply(ref, CorrectionKind.SET, change, reviewer, expected_version=expected_version)

    def split(
        self, ref: DocRef, page: int, reviewer: Reviewer, *, expected_version: int | None = None
    ) -> Applied:
        """Split in two: ``page`` (a source page) starts the second part."""
        return self.apply(
            ref, CorrectionKind.SPLIT, {"at": page}, reviewer, expected_version=expected_version
        )

    def merge(self, ref: DocRef, reviewer: Reviewer, *, expected_version: int | None = None) -> Applied:
        """Merge with the next document of its job."""
        return self.apply(ref, CorrectionKind.MERGE, {}, reviewer, expected_version=expected_version)

    def move(
        self, ref: DocRef, page: int, reviewer: Reviewer, *, expected_version: int | None = None
    ) -> Applied:
        """Move its first page (its boundary with the document before it) to ``page``."""
        return self.apply(ref, CorrectionKind.MOVE, {"at": page}, reviewer, expected_version=expected_version)

    def apply(
        self,
        ref: DocRef,
        kind: CorrectionKind,
        change: Mapping[str, Any],
        reviewer: Reviewer,
        *,
        expected_version: int | None = None,
        key: str | None = None,
    ) -> Applied:
        """Apply one correction made from ``expected_version`` (default: the current one). The same
        correction again returns the first result; one from a replaced version: ReviewConflict."""
        current = self.document(ref)
        base = current.version if expected_version is None else expected_version
        key = key or correction_key(ref.job_id, ref.index, base, kind.value, change)
        earlier = self.state.get_correction(key)
        if earlier is not None:
            return Applied(earlier, False, self._written(earlier))
        if base != current.version:
            raise ReviewConflict(
                f"document {ref} is at version {current.version}, not {base}: someone corrected it "
                "meanwhile; look at it again (review show) and redo your change"
            )
        documents = self.state.list_documents(ref.job_id)
        plan = plan_correction(documents, ref.index, kind, change, self.state.highest_versions(ref.job_id))
        job = self.state.get_job(ref.job_id)
        written = self._writer.write_versions(job, plan.drafts)
        correction = Correction(ref.job_id, ref.index, base, kind.value, reviewer.name, dict(change), key)
        try:
            record, applied = self.state.record_correction(correction, plan.expected, written, plan.removed)
        except ReviewConflict:
            self._remove_objects(written)  # keys of versions that never came to be
            raise
        self._writer.publish(job, self.state.list_documents(ref.job_id))
        return Applied(record, applied, written if applied else self._written(record))

    def _written(self, record: CorrectionRecord) -> list[DocumentRecord]:
        wanted = set(record.written)
        current = [d for d in self.state.list_documents(record.job_id) if (d.index, d.version) in wanted]
        older = [
            v.record for v in self.state.document_versions(record.job_id) if (v.index, v.version) in wanted
        ]
        return sorted([*current, *older], key=lambda doc: doc.index)

    def _remove_objects(self, documents: Sequence[DocumentRecord]) -> None:
        for doc in documents:
            for key in (doc.pdf_key, doc.thumb_key):
                if key:
                    self.store.delete(key)
