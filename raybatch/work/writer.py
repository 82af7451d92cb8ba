"""ResultWriter: answered jobs → their documents in object storage, their rows, their manifests.

A call writes one job or a group of small ones (``write_group``), each under its own lease and
failing alone. Per job: stitch the chunk answers (validated when filed), take each page's text
(its text layer, else the OCR's), slice each document's pages into its own PDF turned upright
(scanned pages made searchable), draw a thumbnail, upload the PDF, the thumbnail and the text, score
each document and mark the doubtful ones for review (``write_outputs``); then, for the call's jobs
together, group, upsert rows and write each manifest (``settle``); then append the group's rows to
the Parquet table, one file for the group, and complete each job under its lease (``finish``). A
source a person reviewed keeps its reviewed documents: a rerun or ``--force`` slices them again,
never the model's answer. Keys come from ids,
so a rerun rewrites the same objects and rows, and its table rows supersede the old ones; a
correction's ``publish`` appends the job's rows again. Plain class: Ray runs a pool of them as actors.

A group's database work is a few statements for all its jobs (``write_group`` reads what they need
at once; ``settle`` renews their leases, upserts their groups and rows and checks their leases
before their manifests together), and one pool of upload threads serves every job: a job's
uploads run on while the next job is built, and are waited for before its rows (``UploadPool``).
Documents are put in batches, the small ones of many jobs together, and only while their leases
hold (one check for the batch, then every held job's PDFs, thumbnails and texts put together, each
job's alone should that fail; the manifests of the group likewise), the database refuses a
canceled job's rows, and completion is fenced: a write fenced by a cancel stops, and removes what
it had written; a lost lease or a cancel stops that job alone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import resource
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import lru_cache
from typing import Protocol

import pymupdf

from raybatch.cancel import remove_outputs
from raybatch.classes import ClassesFile, canonical, classes_digest
from raybatch.classes.settings import classes_of
from raybatch.classes.values import check_values
from raybatch.claude.answer import PROMPT_VERSION, ChunkAnswer
from raybatch.cost import prices_for
from raybatch.errors import LeaseLost, PermanentError, RaybatchError, TransientError, error_class
from raybatch.ids import OutputKeys, sha256_bytes
from raybatch.metrics import Metrics
from raybatch.models import (
    REDO,
    REDO_FRESH,
    CachedPage,
    ChunkRecord,
    DocumentRecord,
    DocumentVersion,
    JobRecord,
    JobStatus,
    Lease,
    ReviewState,
    TextSource,
)
from raybatch.objects.port import JSON_TYPE, PDF_TYPE, TEXT_TYPE, WEBP_TYPE, ObjectStore, PutObject
from raybatch.ocr.cache import PageTextLookup
from raybatch.review.corrections import redo_correction, redo_plan, redo_region
from raybatch.review.mark import Thresholds, carried, kept_layout, mark_documents
from raybatch.settings import (
    OutputSettings,
    PrepareSettings,
    RequestSettings,
    ReviewSettings,
    Settings,
    StoreSettings,
)
from raybatch.sources import read_source_patiently
from raybatch.state.port import Catalog, Flags, JobsWithChunks, RequestTotals, Reviews
from raybatch.steps.group import GroupIdentity, assign_groups, group_identity, group_values
from raybatch.steps.manifest import build_manifest
from raybatch.steps.open_source import open_source
from raybatch.steps.slice import slice_document
from raybatch.steps.stitch import StitchedDocument, stitch
from raybatch.steps.table import JobRows, Provenance
from raybatch.steps.thumbnail import thumbnail
from raybatch.units import MIB
from raybatch.work.each_alone import together_else_alone
from raybatch.work.page_texts import PageTexts, document_text, page_texts
from raybatch.work.table_sink import TableSink
from raybatch.work.upload_pool import MOST_AT_ONCE, Upload, UploadPool

log = logging.getLogger(__name__)


class WriterState(JobsWithChunks, Catalog, Flags, PageTextLookup, Reviews, Protocol):
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
    review_pending: int = 0  # of its documents, those that wait for a person


@dataclass(frozen=True)
class Known:
    """What a ``write_group`` call read for all its jobs at once: reviewed layouts and cached page
    texts by source sha256, document versions and request totals by job."""

    reviewed: Mapping[str, list[DocumentRecord]]
    texts: Mapping[str, list[CachedPage]]
    versions: Mapping[int, list[DocumentVersion]]
    totals: Mapping[int, RequestTotals]

    def cached_page_texts(self, sha256: str, pages: Sequence[int]) -> list[CachedPage]:
        """``PageTextLookup`` of a source of the call."""
        wanted = set(pages)
        return [cached for cached in self.texts[sha256] if cached.text.page in wanted]

    def cached_page_texts_of(self, sha256s: Iterable[str]) -> dict[str, list[CachedPage]]:
        """``PageTextLookup`` of sources of the call."""
        return {sha: self.texts[sha] for sha in sha256s}


@dataclass(frozen=True)
class Built:
    """A job whose objects are written, under its lease: its table rows, whether its rows are to be
    upserted (not those of a source reviewed in this job), and whether it is settled already (a
    redo writes its rows and manifest itself)."""

    lease: Lease
    rows: JobRows
    upsert: bool = True
    settled: bool = False


def documents_at_once(size_bytes: int) -> int:
    """How many documents of one job are built at a time: 1 above 50 MB, 2 from 20 MB, else 4."""
    if size_bytes > 50 * MIB:
        return 1
    if size_bytes >= 20 * MIB:
        return 2
    return MOST_AT_ONCE


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
    """Writes answered jobs. One instance per writer actor; each call writes one job or a group."""

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
        review: ReviewSettings | None = None,
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
        self._thresholds = Thresholds((review or ReviewSettings()).review_below)
        self._classes: ClassesFile = classes_of(claude)
        self._classes_sha: str | None = None  # kept in the database on the first write
        self._spellings: set[tuple[str, tuple[str, ...]]] | None = None  # known groups, read once a call
        self._known: Known | None = None  # what a write_group call's jobs need, read once for it
        self._uploads = UploadPool(self._put_documents)  # every job's, in a few threads

    @classmethod
    def of_settings(cls, state: WriterState, store: ObjectStore, settings: Settings) -> ResultWriter:
        """A writer of the whole settings' sections (the review desk's, the console's)."""
        return cls(
            state,
            store,
            sources=settings.section(StoreSettings),
            prepare=settings.section(PrepareSettings),
            claude=settings.section(RequestSettings),
            review=settings.section(ReviewSettings),
        )

    @property
    def classes(self) -> ClassesFile:
        """The classes file this writer writes under."""
        return self._classes

    def _recorded_classes(self) -> str:
        """The sha256 of this writer's classes file, kept in ``classes_files`` (once)."""
        if self._classes_sha is None:
            sha, claude, used = classes_digest(self._classes), self._claude, canonical(self._classes)
            name, text = claude.classes_file or "default", claude.classes_text or used
            self._state.put_classes_file(sha, name, text, used)
            self._classes_sha = sha
        return self._classes_sha

    def _keys(self) -> OutputKeys:
        """This database's object keys (its id is read once)."""
        if self._output_keys is None:
            self._output_keys = OutputKeys(self._state.database_id())
        return self._output_keys

    def write(self, lease: Lease) -> WriteReport:
        """Write one job held under ``lease``; failures end the job (permanent) or release it."""
        [report] = self.write_group([lease])
        return report

    def write_group(self, leases: Sequence[Lease]) -> list[WriteReport]:
        """Write these jobs, each under its own lease and failing alone: their objects one job after
        another, then their rows and manifests together (``settle``), one table file for those
        written, and each completed. What the jobs need from the database (their chunks, reviewed
        layouts, cached page texts, document versions, request totals, the groups other jobs made)
        is read once for the call, in a few statements. A report per job, in order."""
        ids = [lease.job_id for lease in leases]
        jobs = {job.id: job for job in self._state.get_jobs(ids)}
        chunks = self._state.chunks_of(ids)
        began: dict[int, float] = {}
        built: list[Built] = []
        ended: dict[int, tuple[JobStatus, str | None]] = {}
        self._known = self._read_known(list(jobs.values()))
        try:
            for lease in leases:
                job = jobs[lease.job_id] if lease.job_id in jobs else self._state.get_job(lease.job_id)
                began[job.id], jobs[job.id] = time.time(), job
                try:
                    built.append(self.write_outputs(job, lease, chunks.get(job.id)))
                except Exception as exc:  # every failure is this job's, not the writer's: see _failed
                    ended[job.id] = self._failed(job, lease, self._uploaded(job.id, exc))
            built = [one for one in built if self._uploads_held(one, ended)]
            written, broken = self.settle(built)
        finally:
            self._spellings, self._known = None, None
            self._uploads.settle_all()
        for one in built:
            if one.lease.job_id in broken:
                ended[one.lease.job_id] = self._failed(one.rows.job, one.lease, broken[one.lease.job_id])
        refused = self.finish(written)
        for lease, rows in written:
            cause = refused.get(lease.job_id)
            ended[lease.job_id] = (
                self._failed(rows.job, lease, cause) if cause else (JobStatus.COMPLETED, None)
            )
        kept = {lease.job_id: rows for lease, rows in written}
        return [self._report(jobs[i], began[i], *ended[i], kept.get(i)) for i in ids]

    def _uploaded(self, job_id: int, cause: Exception) -> Exception:
        """``cause``, once the job's documents not yet sent are dropped and its uploads under way
        ended (so that a cancel removes them all)."""
        with contextlib.suppress(Exception):  # the job fails for ``cause`` already
            self._uploads.drop(job_id)
        return cause

    def _uploads_held(self, one: Built, ended: dict[int, tuple[JobStatus, str | None]]) -> bool:
        """Whether the job's objects were all put (its uploads ran on while the next job was built);
        a job whose upload failed is failed here, alone."""
        try:
            self._uploads.wait(one.lease.job_id)
        except Exception as exc:
            ended[one.lease.job_id] = self._failed(one.rows.job, one.lease, exc)
            return False
        return True

    def _read_known(self, jobs: Sequence[JobRecord]) -> Known:
        """What writing these jobs reads from the database, for all of them at once."""
        state, ids, sources = self._state, [job.id for job in jobs], {job.sha256 for job in jobs}
        return Known(
            reviewed=state.reviewed_layouts(sources),
            texts=state.cached_page_texts_of(sources),
            versions=state.versions_of(ids),
            totals=state.request_totals_by_job(ids),
        )

    def _report(
        self, job: JobRecord, started: float, status: JobStatus, error: str | None, rows: JobRows | None
    ) -> WriteReport:
        self._metrics.job_finished(status, job.priority)
        docs = rows.documents if rows is not None and status is JobStatus.COMPLETED else []
        pending = sum(1 for doc in docs if doc.review == ReviewState.PENDING)
        ended, peak = time.time(), _peak_rss_mb()
        return WriteReport(
            job.id, status, job.size_bytes / MIB, started, ended, len(docs), peak, error, pending
        )

    def _failed(self, job: JobRecord, lease: Lease, exc: Exception) -> tuple[JobStatus, str]:
        """What a failed write leaves: a lost lease stops (a cancel removes the outputs), an outage
        parks the job, anything else fails it at once with its cause, naming the file (an
        unexpected exception here is a bug met by this job, not a dead writer to try again)."""
        if isinstance(exc, LeaseLost):
            if self._state.get_job(job.id).status is JobStatus.CANCELED:
                remove_outputs(self._state, self._store, job.id)
                return JobStatus.CANCELED, "canceled while being written; its outputs removed"
            return JobStatus.WRITING, f"lease lost: {exc}"
        if isinstance(exc, TransientError):  # an outage past its budget: parked, the try not counted
            return self._park(job, lease), f"{error_class(exc)}: {exc}"
        reason = str(exc) if isinstance(exc, PermanentError) else _foreign_reason(job, exc)
        if not isinstance(exc, PermanentError):
            log.error("job %d: %s", job.id, reason, exc_info=exc)
        self._state.fail_job(job.id, "write", error_class(exc), reason, lease=lease)
        return JobStatus.FAILED, f"{error_class(exc)}: {reason}"

    def _park(self, job: JobRecord, lease: Lease) -> JobStatus:
        """Back to answered, to be written again; the claim that failed for an outage is not counted."""
        try:
            again = {"attempts": max(0, lease.attempt - 1)}
            back = JobStatus.ANSWERED
            moved = self._state.transition(job.id, [JobStatus.WRITING], back, lease=lease, **again)
        except RaybatchError:  # the database is away too: the lease runs out and frees the job
            return JobStatus.WRITING
        return JobStatus.ANSWERED if moved else JobStatus.WRITING

    def table(self) -> TableSink:
        """The documents table this writer appends to."""
        return TableSink(self._store, self._keys(), now=self._now, classes=self._classes)

    def write_outputs(
        self, job: JobRecord, lease: Lease, chunks: Sequence[ChunkRecord] | None = None
    ) -> Built:
        """A job's objects (a redo's rows and manifest too); its rows, groups and manifest are
        written by ``settle``, its table rows appended by ``finish``. ``chunks``: the job's, when
        already read."""
        chunks = self._state.get_chunks(job.id) if chunks is None else chunks
        answers = [(c.n, ChunkAnswer.model_validate_json(c.answer or "")) for c in chunks]
        stitched = stitch(answers, job.pages or 0, self._classes)
        rotations = page_rotations(chunks, stitched)
        if _redoing(job):
            return Built(lease, self._redo(job, lease, chunks, answers, stitched), settled=True)
        kept = self._reviewed(job)
        if kept and kept[0].job_id == job.id:  # reviewed here: its rows and objects stand as they are
            rows = JobRows(job, kept, self._provenance(), chunks, self._stored_texts(kept))
            return Built(lease, rows, upsert=False)
        layout = kept_layout(kept) if kept else stitched
        records, texts = self._build_documents(job, layout, rotations, lease)
        if kept:
            records = carried(records, kept)
        else:
            records = mark_documents(records, answers, stitched, self._ocr(job), self._thresholds)
        return Built(lease, JobRows(job, records, self._provenance(), chunks, texts))

    def settle(self, built: Sequence[Built]) -> tuple[list[tuple[Lease, JobRows]], dict[int, Exception]]:
        """The rows, groups and manifests of jobs whose objects are written, together: their leases
        renewed in one statement, their groups and rows upserted in a few (each job alone should the
        rows of all fail), the manifests of those whose lease holds put together (each alone should
        that fail). The jobs settled, with their table rows; what broke each of the others, by job id."""
        broken: dict[int, Exception] = {}
        rows_of = {one.lease.job_id: one.rows for one in built}

        unsettled = [one for one in built if not one.settled]
        try:
            leases = [one.lease for one in unsettled]
            renewed = {lease.job_id for lease in self._state.renew_leases(leases, self._lease_seconds)}
        except Exception as exc:  # the database is away: every job of the call meets it
            return [(one.lease, one.rows) for one in built if one.settled], {x.job_id: exc for x in leases}
        broken |= {one.lease.job_id: _lost(one.lease) for one in unsettled if one.lease.job_id not in renewed}
        upserts = {one.lease.job_id: list(one.rows.documents) for one in unsettled if one.upsert}
        grouped, failed = self._group_all({i: records for i, records in upserts.items() if i not in broken})
        broken |= failed
        for job_id, records in grouped.items():
            rows_of[job_id] = replace(rows_of[job_id], documents=records)
        broken |= self._upsert_documents(grouped)
        placed = [one for one in unsettled if one.lease.job_id not in broken]
        try:
            held = self._state.holding([one.lease for one in placed])
        except Exception as exc:
            held, broken = set(), broken | {one.lease.job_id: exc for one in placed}
        manifests: dict[int, PutObject] = {}
        for one in placed:
            job_id, rows = one.lease.job_id, rows_of[one.lease.job_id]
            try:
                self._drop_stale_objects(job_id, rows.documents)
                if job_id not in held:  # checked before its manifest, as before its objects
                    raise _lost(one.lease)
                manifest = self._manifest(rows.job, rows.documents, rows.chunks)
                manifests[job_id] = _json_object(self._keys().manifest(job_id), manifest)
            except Exception as exc:
                broken.setdefault(job_id, exc)
        broken |= self._put_manifests(manifests)
        written = [(one.lease, rows_of[one.lease.job_id]) for one in built if one.lease.job_id not in broken]
        return written, broken

    def _put_manifests(self, manifests: Mapping[int, PutObject]) -> dict[int, Exception]:
        """Put these jobs' manifests (by job) together, else each alone; what refused each job."""

        def put(some: Mapping[int, PutObject]) -> dict[int, Exception]:
            self._store.put_many(list(some.values()))
            return {}

        return together_else_alone(manifests, put)

    def _upsert_documents(self, documents: Mapping[int, list[DocumentRecord]]) -> dict[int, Exception]:
        """Upsert these jobs' rows together, else each job's alone; what refused each job (a cancel,
        or its rows failing)."""

        def upsert(some: Mapping[int, list[DocumentRecord]]) -> dict[int, Exception]:
            canceled = self._state.upsert_documents_of(some)
            return {i: LeaseLost(f"job {i} was canceled: its documents are not written") for i in canceled}

        return together_else_alone(documents, upsert)

    def _redo(
        self,
        job: JobRecord,
        lease: Lease,
        chunks: Sequence[ChunkRecord],
        answers: Sequence[tuple[int, ChunkAnswer]],
        stitched: Sequence[StitchedDocument],
    ) -> JobRows:
        """``raybatch redo``: the new answer's documents over the pages asked again become new
        versions, in the ledger as a ``redo``; the previous versions are kept."""
        current = self._state.list_documents(job.id)
        answered = [self._record(job, index, doc) for index, doc in enumerate(stitched)]
        answered = mark_documents(answered, answers, stitched, self._ocr(job), self._thresholds)
        region = redo_region(job.error_message)
        plan = redo_plan(current, answered, region, self._state.highest_versions(job.id))
        self._fence(lease)
        written = self.write_versions(job, plan.drafts)
        digest = sha256_bytes("".join(answer.model_dump_json() for _, answer in answers).encode())[:16]
        correction = redo_correction(job.id, current, digest, fresh=job.error_class == REDO_FRESH)
        self._fence(lease)
        self._state.record_correction(correction, plan.expected, written, plan.removed)
        records = self._state.list_documents(job.id)
        self._drop_stale_objects(job.id, records, fresh=True)  # the versions it made included
        self._fence(lease)
        self._put_json(self._keys().manifest(job.id), self._manifest(job, records, chunks))
        return JobRows(job, records, self._provenance(), chunks, self._stored_texts(records))

    def finish(self, written: Sequence[tuple[Lease, JobRows]]) -> dict[int, Exception]:
        """Append a group of written jobs' rows to the table (one file), then complete each job;
        what refused each job that was not completed (its lease lost, an outage), by job id.

        A job whose completion is refused after the append (its lease lost) is written again later:
        its newer rows supersede these (``raybatch.steps.table_files``)."""
        refused: dict[int, Exception] = {}
        try:
            holding = self._state.holding([lease for lease, _ in written])
        except Exception as exc:
            return {lease.job_id: exc for lease, _ in written}
        for lease, _ in written:
            if lease.job_id not in holding:
                refused[lease.job_id] = _lost(lease)
        held = [(lease, rows) for lease, rows in written if lease.job_id not in refused]
        refused |= self._append(held)
        held = [(lease, rows) for lease, rows in held if lease.job_id not in refused]
        for redo in (False, True):  # a redo's mark is cleared as it completes
            mine = [(lease, rows) for lease, rows in held if _redoing(rows.job) is redo]
            cleared = {"error_class": None, "error_message": None} if redo else {}
            leases = [lease for lease, _ in mine]
            if not leases:
                continue
            try:
                done = self._state.finish_claims(
                    leases,
                    JobStatus.COMPLETED,
                    progress=100.0,
                    classes_sha=self._recorded_classes(),
                    **cleared,
                )
            except Exception as exc:
                refused |= {lease.job_id: exc for lease in leases}
                continue
            for lease, rows in mine:
                if lease.job_id in done:
                    self._metrics.documents_written(len(rows.documents), rows.job.priority)
                else:
                    refused[lease.job_id] = _lost(lease)
        return refused

    def _append(self, written: Sequence[tuple[Lease, JobRows]]) -> dict[int, Exception]:
        """The group's rows as one table file, else each job's rows alone; what refused each job."""

        def append(some: Mapping[int, JobRows]) -> dict[int, Exception]:
            self.table().append(list(some.values()))
            return {}

        return together_else_alone({lease.job_id: rows for lease, rows in written}, append)

    def publish(self, job: JobRecord, records: Sequence[DocumentRecord], lease: Lease | None = None) -> None:
        """The job's manifest from its current ``records``, and its rows appended to the table
        anew (they supersede its older rows: ``raybatch.steps.table_files``)."""
        chunks = self._state.get_chunks(job.id)
        self._fence(lease)
        self._put_json(self._keys().manifest(job.id), self._manifest(job, records, chunks))
        self._fence(lease)
        self.table().append([JobRows(job, records, self._provenance(), chunks, self._stored_texts(records))])

    def _stored_texts(self, records: Sequence[DocumentRecord]) -> dict[int, str]:
        """Each document's text, read back from its text object (a document without one: none)."""
        return {
            doc.index: self._store.get(doc.text_key).decode("utf-8")
            for doc in records
            if doc.text_key and self._store.exists(doc.text_key)
        }

    def _provenance(self) -> Provenance:
        return Provenance(
            written_at=self._now(),
            model=self._claude.claude_model,
            prompt_version=PROMPT_VERSION,
            classes_sha256=self._recorded_classes(),
        )

    def _texts(self, job: JobRecord) -> PageTextLookup:
        """Where the job's cached page texts are read: what its call read, else the database."""
        known = self._known
        return known if known is not None and job.sha256 in known.texts else self._state

    def _reviewed(self, job: JobRecord) -> list[DocumentRecord]:
        known = self._known
        if known is not None and job.sha256 in known.reviewed:
            return known.reviewed[job.sha256]
        return self._state.reviewed_layout(job.sha256)

    def _ocr(self, job: JobRecord) -> dict[int, float]:
        """Each OCR-read page's word confidence (the best of the engines that read it)."""
        found: dict[int, float] = {}
        for cached in self._texts(job).cached_page_texts(job.sha256, range(1, (job.pages or 0) + 1)):
            if cached.text.source is TextSource.OCR:
                page = cached.text.page
                found[page] = max(found.get(page, 0.0), cached.text.confidence)
        return found

    def _fence(self, lease: Lease | None) -> None:
        """Refuse to write once the lease is gone (taken over, or the job canceled)."""
        if lease is not None and not self._state.holds(lease):
            raise _lost(lease)

    def _build_documents(
        self,
        job: JobRecord,
        stitched: Sequence[StitchedDocument],
        rotations: Mapping[int, int],
        lease: Lease,
        versions: Mapping[int, int] | None = None,
    ) -> tuple[list[DocumentRecord], dict[int, str]]:
        """Slice and draw every document and hand its objects, with its text, to the uploads (at
        most 1/2/4 built and not yet uploaded; ``write_group`` waits for them before the job's
        rows). The records, and each document's text by index."""
        data = read_source_patiently(job.source_uri, self._sources, sha256=job.sha256)  # the file prepared
        at_once = documents_at_once(len(data))
        records: list[DocumentRecord] = []
        texts: dict[int, str] = {}
        with _opened(data, job, self._max_page_pixels) as source:
            spans = [(d.first_page, d.last_page) for d in stitched]
            pages = page_texts(source, job.sha256, self._texts(job), spans)
            for index, doc in enumerate(stitched):
                texts[index] = document_text(pages, doc.first_page, doc.last_page)
                pdf, thumb = self._drawn(source, doc, rotations, pages)
                version = (versions or {}).get(index, 1)
                objects = self._document_objects(job, index, version, (pdf, thumb, texts[index]))
                self._uploads.add(Upload(lease, objects), at_once)
                pdf_key, thumb_key, text_key = (one.key for one in objects)
                record = self._record(job, index, doc)
                records.append(
                    replace(record, pdf_key=pdf_key, thumb_key=thumb_key, text_key=text_key, version=version)
                )
        return records, texts

    def _drawn(
        self,
        source: pymupdf.Document,
        doc: StitchedDocument | DocumentRecord,
        rotations: Mapping[int, int],
        pages: PageTexts,
    ) -> tuple[bytes, bytes]:
        """The document's PDF, its scanned pages searchable unless SEARCHABLE_PDF is off, and its
        thumbnail: drawn from its first page in the source, turned upright as the slice is (the same
        picture without opening the slice again, whose fonts would load again: as long as the draw)."""
        ocr = pages.ocr_texts(doc.first_page, doc.last_page) if self._outputs.searchable_pdf else {}
        pdf = slice_document(source, doc.first_page, doc.last_page, rotations, ocr)
        first = source.load_page(doc.first_page - 1)
        return pdf, thumbnail(first, rotation=rotations.get(doc.first_page, 0))

    def write_versions(self, job: JobRecord, drafts: Sequence[DocumentRecord]) -> list[DocumentRecord]:
        """New versions of some of a job's documents (a correction): each sliced from the source at
        its pages, turned upright, drawn, uploaded with its text under its version's keys, and grouped."""
        chunks = self._state.get_chunks(job.id)
        answers = [(c.n, ChunkAnswer.model_validate_json(c.answer or "")) for c in chunks]
        rotations = page_rotations(chunks, stitch(answers, job.pages or 0, self._classes))
        data = read_source_patiently(job.source_uri, self._sources, sha256=job.sha256)
        written = []
        with _opened(data, job, self._max_page_pixels) as source:
            pages = page_texts(source, job.sha256, self._state, [(d.first_page, d.last_page) for d in drafts])
            for draft in drafts:
                pdf, thumb = self._drawn(source, draft, rotations, pages)
                text = document_text(pages, draft.first_page, draft.last_page)
                objects = self._document_objects(job, draft.index, draft.version, (pdf, thumb, text))
                self._store.put_many(objects)
                pdf_key, thumb_key, text_key = (one.key for one in objects)
                written.append(replace(draft, pdf_key=pdf_key, thumb_key=thumb_key, text_key=text_key))
        return self._group(written)

    def _document_objects(
        self, job: JobRecord, index: int, version: int, made: tuple[bytes, bytes, str]
    ) -> list[PutObject]:
        """One document version's PDF, thumbnail and text, as objects under its keys. The PDF, the
        document itself, carries its job, index and source name as metadata; the thumbnail and text
        drawn from it carry none (on a local store, two sidecar files fewer a document)."""
        pdf, thumb, text = made
        metadata = {"job-id": str(job.id), "document-index": str(index), "source-name": job.source_name}
        pdf_key, thumb_key, text_key = self._document_keys(job.id, index, version)
        return [
            PutObject(pdf_key, pdf, PDF_TYPE, metadata),
            PutObject(thumb_key, thumb, WEBP_TYPE),
            PutObject(text_key, text.encode("utf-8"), TEXT_TYPE),
        ]

    def _put_documents(self, uploads: Sequence[Upload]) -> dict[int, Exception]:
        """Put a batch of documents (``UploadPool``), of one job or several: their leases checked
        in one statement, then every held job's objects together, else each job's alone; what
        refused each job."""
        leases = {one.job_id: one.lease for one in uploads}
        held = self._state.holding(list(leases.values()))
        refused: dict[int, Exception] = {i: _lost(lease) for i, lease in leases.items() if i not in held}
        objects: dict[int, list[PutObject]] = {}
        for one in uploads:
            if one.job_id not in refused:
                objects.setdefault(one.job_id, []).extend(one.objects)

        def put(some: Mapping[int, list[PutObject]]) -> dict[int, Exception]:
            self._store.put_many([obj for mine in some.values() for obj in mine])
            return {}

        return refused | together_else_alone(objects, put)

    def _document_keys(self, job_id: int, index: int, version: int) -> tuple[str, str, str]:
        """The keys of a document version's PDF, thumbnail and text."""
        keys = self._keys()
        return (
            keys.document_pdf(job_id, index, version),
            keys.document_thumb(job_id, index, version),
            keys.document_text(job_id, index, version),
        )

    def _record(self, job: JobRecord, index: int, doc: StitchedDocument) -> DocumentRecord:
        """The row of a stitched document, its values checked against the classes file (its objects'
        keys not yet set)."""
        checked = check_values(self._classes, doc.type, doc.values)
        return DocumentRecord(
            job_id=job.id,
            index=index,
            first_page=doc.first_page,
            last_page=doc.last_page,
            doc_type=checked.doc_type,
            fields=dict(doc.fields),
            values=checked.values,
            problems=checked.problems,
            repaired=doc.repaired,
        )

    def _group(self, records: list[DocumentRecord]) -> list[DocumentRecord]:
        """Group key per document of one job (see ``_group_all``)."""
        grouped, failed = self._group_all({0: records})
        if failed:
            raise failed[0]
        return grouped[0]

    def _group_all(
        self, documents: Mapping[int, list[DocumentRecord]]
    ) -> tuple[dict[int, list[DocumentRecord]], dict[int, Exception]]:
        """Group key per document of these jobs, near-spellings joined to groups other jobs already
        made; their groups upserted together (each job's alone should that fail). The documents
        grouped by job, and what broke each job that was not."""
        group_by = self._classes.group_by
        if not group_by or not documents:
            return dict(documents), {}
        spellings = self._spellings
        if spellings is None:  # read once for a group of jobs (``write_group`` forgets it at its end)
            spellings = self._spellings = set(self._state.group_spellings(group_by))
        grouped: dict[int, list[DocumentRecord]] = {}
        labels: dict[int, dict[str, str]] = {}
        for job_id, records in documents.items():
            known = list(_known_groups(sorted(spellings)))
            grouped[job_id] = assign_groups(records, known, group_by)
            for doc in grouped[job_id]:
                values = group_values(doc, group_by)
                identity = group_identity(*values)
                if doc.group_key and identity:
                    labels.setdefault(job_id, {})[doc.group_key] = identity.label
                    spellings.add((doc.group_key, tuple(str(value or "") for value in values)))
        failed = self._upsert_groups(labels)
        return {i: records for i, records in grouped.items() if i not in failed}, failed

    def _upsert_groups(self, labels: Mapping[int, Mapping[str, str]]) -> dict[int, Exception]:
        """Upsert these jobs' group labels (by job) together, else each job's alone; what refused each job."""

        def upsert(some: Mapping[int, Mapping[str, str]]) -> dict[int, Exception]:
            self._state.upsert_groups({key: label for mine in some.values() for key, label in mine.items()})
            return {}

        return together_else_alone(labels, upsert)

    def _drop_stale_objects(
        self, job_id: int, records: Sequence[DocumentRecord], fresh: bool = False
    ) -> None:
        """A rerun that found fewer documents leaves no objects of the old ones behind (previous
        versions' objects stay: those the call read, or the database's when ``fresh``); requests
        prepared ahead (by ``estimate``) are dropped once answered."""
        known = self._known
        if not fresh and known is not None and job_id in known.versions:
            versions = known.versions[job_id]
        else:
            versions = self._state.document_versions(job_id)
        kept = [*records, *(old.record for old in versions)]
        keep = {key for doc in kept for key in (doc.pdf_key, doc.thumb_key, doc.text_key) if key}
        keys = self._keys()
        job = f"{keys.job_prefix(job_id)}/"
        documents, prepared = f"{job}documents/", keys.prepared(job_id)
        for key in list(self._store.list(job)):  # one listing for both
            if key.startswith(documents) and key not in keep:
                self._store.delete(key)
            elif key.startswith(prepared):
                self._store.delete(key)  # requests an ``estimate`` prepared ahead: answered now

    def _manifest(
        self, job: JobRecord, records: Sequence[DocumentRecord], chunks: Sequence[ChunkRecord]
    ) -> bytes:
        claude, known = self._claude, self._known
        if known is not None and job.id in known.totals:
            totals = known.totals[job.id]
        else:
            totals = self._state.request_totals([job.id])
        return build_manifest(
            job,
            records,
            chunks,
            prices=prices_for(claude.claude_model, claude.claude_prices),
            model=claude.claude_model,
            prompt_version=PROMPT_VERSION,
            classes=self._classes,
            usage=totals.usage_by_mode,  # a redo's first answers too
        )

    def _put_json(self, key: str, data: bytes) -> None:
        self._store.put_many([_json_object(key, data)])


def _lost(lease: Lease) -> LeaseLost:
    """Why a write stops for a lease that no longer holds (taken over, or the job canceled)."""
    return LeaseLost(f"job {lease.job_id}: lease {lease.token} of {lease.worker_id} is gone")


def _json_object(key: str, data: bytes) -> PutObject:
    json.loads(data)  # never write a manifest that does not parse
    return PutObject(key, data, JSON_TYPE)


# A known spelling's identity is pure and costly to derive (names normalised): once per writer.
_spelling_identity = lru_cache(maxsize=1 << 16)(group_identity)


def _known_groups(spellings: Sequence[tuple[str, tuple[str, ...]]]) -> Iterator[GroupIdentity]:
    for key, values in spellings:
        identity = _spelling_identity(*values)
        if identity is not None:
            yield replace(identity, key=key)


@contextmanager
def _opened(data: bytes, job: JobRecord, max_page_pixels: int) -> Iterator[pymupdf.Document]:
    """Open a source for slicing (its bytes already checked against the job's sha256). Its pages
    are not checked against the pixel budget again: registering the job checked these very bytes."""
    doc = open_source(data, job.kind, max_page_pixels=max_page_pixels, checked=True)
    try:
        yield doc
    finally:
        doc.close()


def _peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB (Linux reports KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if os.name == "posix" else peak / MIB


def _foreign_reason(job: JobRecord, exc: Exception) -> str:
    """A one-line reason for an exception raybatch did not raise on purpose: the file, the
    exception's class and its first line (cut short; the traceback goes to the writer's log)."""
    lines = str(exc).strip().splitlines()
    first = lines[0][:200] if lines else "no message"
    return f"{job.source_name}: unexpected {type(exc).__name__} while writing: {first}"


def _redoing(job: JobRecord) -> bool:
    """Whether this write is a ``raybatch redo``'s (its mark is cleared once written)."""
    return job.error_class in (REDO, REDO_FRESH)
