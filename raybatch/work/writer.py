"""ResultWriter: one answered job → its documents in object storage, its rows, its manifest.

Per job: stitch the chunk answers (validated when filed), take each page's text (its text layer,
else the OCR's), slice each document's pages into its own PDF turned upright (scanned pages made
searchable), draw a thumbnail, upload the PDF, the thumbnail and the text, then group, upsert rows
and write the manifest (``write_outputs``); then append the jobs' rows to the Parquet table, one
file for the group, and complete each job under its lease (``finish``). Keys come from ids, so a
rerun rewrites the same objects and rows, and its table rows supersede the old ones. Plain class:
Ray runs a pool of them as actors.

Every object is put only while the lease still holds, and the database refuses a canceled job's
rows: a write fenced by a cancel stops, and removes what it had written.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from threading import BoundedSemaphore
from typing import Protocol

import pymupdf

from raybatch.cancel import remove_outputs
from raybatch.claude.answer import PROMPT_VERSION, ChunkAnswer
from raybatch.cost import prices_for
from raybatch.errors import LeaseLost, PermanentError, RaybatchError, TransientError, error_class
from raybatch.ids import OutputKeys
from raybatch.metrics import Metrics
from raybatch.models import ChunkRecord, DocumentRecord, JobRecord, JobStatus, Lease, field_values
from raybatch.objects.port import ObjectStore
from raybatch.ocr.cache import PageTextLookup
from raybatch.settings import OutputSettings, PrepareSettings, RequestSettings, StoreSettings
from raybatch.sources import read_source
from raybatch.state.port import Catalog, Flags, JobsWithChunks
from raybatch.steps.group import GroupIdentity, assign_groups, group_identity
from raybatch.steps.manifest import build_manifest
from raybatch.steps.open_source import open_source
from raybatch.steps.slice import slice_document
from raybatch.steps.stitch import StitchedDocument, stitch
from raybatch.steps.table import JobRows, Provenance
from raybatch.steps.thumbnail import thumbnail
from raybatch.units import MIB
from raybatch.work.page_texts import PageTexts, document_text, page_texts
from raybatch.work.table_sink import TableSink

TEXT_TYPE = "text/plain; charset=utf-8"


class WriterState(JobsWithChunks, Catalog, Flags, PageTextLookup, Protocol):
    """The slices of the state store that writing a job's documents uses."""


@dataclass(frozen=True)
class WriteReport:
    """What one write did, for the dispatcher's accounting and the memory assertion."""

    job_id: int
    status: JobStatus
    source_mb: float
    started: float
    ended: float
    documents: int
    peak_rss_mb: float
    error: str | None = None


def documents_at_once(size_bytes: int) -> int:
    """How many documents of one job are built at a time: 1 above 50 MB, 2 from 20 MB, else 4."""
    if size_bytes > 50 * MIB:
        return 1
    if size_bytes >= 20 * MIB:
        return 2
    return 4


def page_rotations(chunks: Sequence[ChunkRecord], stitched: Sequence[StitchedDocument]) -> dict[int, int]:
    """Each page's total turn: what preparing found (the image Claude saw was already turned),
    plus what Claude still saw."""
    found: dict[int, int] = {}
    for chunk in chunks:
        found.update(chunk.rotations)
    total = dict(found)
    for doc in stitched:
        for page, extra in doc.rotations.items():
            total[page] = (found.get(page, 0) + extra) % 360
    return total


class ResultWriter:
    """Writes answered jobs. One instance per writer actor; each call writes one job."""

    def __init__(
        self,
        state: WriterState,
        store: ObjectStore,
        *,
        sources: StoreSettings,
        prepare: PrepareSettings,
        claude: RequestSettings,
        lease_seconds: float = 300.0,
        metrics: Metrics | None = None,
        outputs: OutputSettings | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._state = state
        self._store = store
        self._sources = sources
        self._max_page_pixels = prepare.max_page_pixels
        self._claude = claude
        self._lease_seconds = lease_seconds
        self._metrics = metrics or Metrics()
        self._outputs = outputs or OutputSettings()
        self._now = now
        self._output_keys: OutputKeys | None = None

    def _keys(self) -> OutputKeys:
        """This database's object keys (its id is read once)."""
        if self._output_keys is None:
            self._output_keys = OutputKeys(self._state.database_id())
        return self._output_keys

    def write(self, lease: Lease) -> WriteReport:
        """Write one job held under ``lease``; failures end the job (permanent) or release it."""
        started = time.time()
        job = self._state.get_job(lease.job_id)
        try:
            count = self._write(job, lease)
            status, error = JobStatus.COMPLETED, None
        except LeaseLost as exc:
            status, error = JobStatus.WRITING, f"lease lost: {exc}"
            count = 0
            if self._state.get_job(job.id).status is JobStatus.CANCELED:
                remove_outputs(self._state, self._store, job.id)
                status, error = JobStatus.CANCELED, "canceled while being written; its outputs removed"
        except TransientError as exc:  # an outage past its budget: parked, the try not counted
            status, error, count = self._park(job, lease), f"{error_class(exc)}: {exc}", 0
        except PermanentError as exc:
            self._state.fail_job(job.id, "write", error_class(exc), str(exc), lease=lease)
            status, error, count = JobStatus.FAILED, f"{error_class(exc)}: {exc}", 0
        self._metrics.job_finished(status, job.priority)
        return WriteReport(
            job.id, status, job.size_bytes / MIB, started, time.time(), count, _peak_rss_mb(), error
        )

    def _park(self, job: JobRecord, lease: Lease) -> JobStatus:
        """Back to answered, to be written again; the claim that failed for an outage is not counted."""
        try:
            again = {"attempts": max(0, lease.attempt - 1)}
            self._state.transition(job.id, [JobStatus.WRITING], JobStatus.ANSWERED, **again)
        except RaybatchError:  # the database is away too: the lease runs out and frees the job
            return JobStatus.WRITING
        return JobStatus.ANSWERED

    def table(self) -> TableSink:
        """The documents table this writer appends to."""
        return TableSink(self._store, self._keys(), now=self._now)

    def _write(self, job: JobRecord, lease: Lease) -> int:
        rows = self.write_outputs(job, lease)
        self.finish([(lease, rows)])
        return len(rows.documents)

    def write_outputs(self, job: JobRecord, lease: Lease) -> JobRows:
        """A job's objects, rows, groups and manifest; its table rows, to be appended by ``finish``."""
        chunks = self._state.get_chunks(job.id)
        answers = [(c.n, ChunkAnswer.model_validate_json(c.answer or "")) for c in chunks]
        stitched = stitch(answers, job.pages or 0)
        rotations = page_rotations(chunks, stitched)
        records, texts = self._build_documents(job, stitched, rotations, lease)
        self._state.renew_lease(lease, self._lease_seconds)
        records = self._group(records)
        self._state.upsert_documents(job.id, records)
        self._drop_stale_objects(job.id, len(records))
        self._fence(lease)
        self._put_json(self._keys().manifest(job.id), self._manifest(job, records, chunks))
        return JobRows(job, records, self._provenance(), chunks, texts)

    def finish(self, written: Sequence[tuple[Lease, JobRows]]) -> None:
        """Append a group of written jobs' rows to the table (one file), then complete each job.

        A job whose completion is refused after the append (its lease lost) is written again later:
        its newer rows supersede these (``raybatch.steps.table_files``)."""
        for lease, _ in written:
            self._fence(lease)
        self.table().append([rows for _, rows in written])
        for lease, rows in written:
            self._state.finish_claim(lease, JobStatus.COMPLETED, progress=100.0)
            self._metrics.documents_written(len(rows.documents), rows.job.priority)

    def _provenance(self) -> Provenance:
        return Provenance(
            written_at=self._now(), model=self._claude.claude_model, prompt_version=PROMPT_VERSION
        )

    def _fence(self, lease: Lease) -> None:
        """Refuse to write once the lease is gone (taken over, or the job canceled)."""
        if not self._state.holds(lease):
            raise LeaseLost(f"job {lease.job_id}: lease {lease.token} of {lease.worker_id} is gone")

    def _build_documents(
        self, job: JobRecord, stitched: Sequence[StitchedDocument], rotations: Mapping[int, int], lease: Lease
    ) -> tuple[list[DocumentRecord], dict[int, str]]:
        """Slice, draw and upload every document, with its text; at most 1/2/4 built and not yet
        uploaded. The records, and each document's text by index."""
        data = read_source(job.source_uri, self._sources, sha256=job.sha256)  # the file prepared
        at_once = documents_at_once(len(data))
        slots = BoundedSemaphore(at_once)
        with (
            ThreadPoolExecutor(max_workers=at_once, thread_name_prefix=f"write-{job.id}") as pool,
            _opened(data, job, self._max_page_pixels) as source,
        ):
            spans = [(d.first_page, d.last_page) for d in stitched]
            pages = page_texts(source, job.sha256, self._state, spans)
            uploads: list[Future[DocumentRecord]] = []
            texts: dict[int, str] = {}
            for index, doc in enumerate(stitched):
                slots.acquire()
                texts[index] = document_text(pages, doc.first_page, doc.last_page)
                pdf = self._slice(source, doc, rotations, pages)
                thumb = thumbnail(pdf)
                future = pool.submit(self._upload, job, index, doc, (pdf, thumb, texts[index]), lease)
                future.add_done_callback(lambda _: slots.release())
                uploads.append(future)
            return [future.result() for future in uploads], texts

    def _slice(
        self, source: pymupdf.Document, doc: StitchedDocument, rotations: Mapping[int, int], pages: PageTexts
    ) -> bytes:
        """The document's PDF; its scanned pages searchable unless SEARCHABLE_PDF is off."""
        ocr = pages.ocr_texts(doc.first_page, doc.last_page) if self._outputs.searchable_pdf else {}
        return slice_document(source, doc.first_page, doc.last_page, rotations, ocr)

    def _upload(
        self, job: JobRecord, index: int, doc: StitchedDocument, made: tuple[bytes, bytes, str], lease: Lease
    ) -> DocumentRecord:
        pdf, thumb, text = made
        metadata = {"job-id": str(job.id), "document-index": str(index), "source-name": job.source_name}
        keys = self._keys()
        pdf_key, thumb_key = keys.document_pdf(job.id, index), keys.document_thumb(job.id, index)
        text_key = keys.document_text(job.id, index)
        self._fence(lease)
        self._store.put(pdf_key, pdf, content_type="application/pdf", metadata=metadata)
        self._fence(lease)
        self._store.put(thumb_key, thumb, content_type="image/webp", metadata=metadata)
        self._fence(lease)
        self._store.put(text_key, text.encode("utf-8"), content_type=TEXT_TYPE, metadata=metadata)
        return DocumentRecord(
            job_id=job.id,
            index=index,
            first_page=doc.first_page,
            last_page=doc.last_page,
            doc_type=doc.type.value,
            fields=dict(doc.fields),
            **field_values(doc),
            pdf_key=pdf_key,
            thumb_key=thumb_key,
            text_key=text_key,
        )

    def _group(self, records: list[DocumentRecord]) -> list[DocumentRecord]:
        """Group key per document, near-spellings joined to groups other jobs already made."""
        known = list(_known_groups(self._state.group_spellings()))
        grouped: list[DocumentRecord] = assign_groups(records, known)
        for doc in grouped:
            identity = group_identity(doc.counterparty, doc.reference)
            if doc.group_key and identity:
                self._state.upsert_group(doc.group_key, identity.label)
        return grouped

    def _drop_stale_objects(self, job_id: int, count: int) -> None:
        """A rerun that found fewer documents leaves no objects of the old ones behind; requests
        prepared ahead (by ``estimate``) are dropped once answered."""
        keys = self._keys()
        keep = {keys.document_pdf(job_id, i) for i in range(count)}
        keep |= {keys.document_thumb(job_id, i) for i in range(count)}
        keep |= {keys.document_text(job_id, i) for i in range(count)}
        for key in list(self._store.list(f"{keys.job_prefix(job_id)}/documents/")):
            if key not in keep:
                self._store.delete(key)
        for key in list(self._store.list(keys.prepared(job_id))):
            self._store.delete(key)  # requests an ``estimate`` prepared ahead: answered now

    def _manifest(
        self, job: JobRecord, records: Sequence[DocumentRecord], chunks: Sequence[ChunkRecord]
    ) -> bytes:
        claude = self._claude
        return build_manifest(
            job,
            records,
            chunks,
            prices=prices_for(claude.claude_model, claude.claude_prices),
            model=claude.claude_model,
            prompt_version=PROMPT_VERSION,
        )

    def _put_json(self, key: str, data: bytes) -> None:
        json.loads(data)  # never write a manifest that does not parse
        self._store.put(key, data, content_type="application/json")


def _known_groups(spellings: Sequence[tuple[str, str, str]]) -> Iterator[GroupIdentity]:
    for key, party, reference in spellings:
        identity = group_identity(party, reference)
        if identity is not None:
            yield replace(identity, key=key)


@contextmanager
def _opened(data: bytes, job: JobRecord, max_page_pixels: int) -> Iterator[pymupdf.Document]:
    """Open a source for slicing (its bytes already checked against the job's sha256)."""
    doc = open_source(data, job.kind, max_page_pixels=max_page_pixels)
    try:
        yield doc
    finally:
        doc.close()


def _peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB (Linux reports KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if os.name == "posix" else peak / MIB
