"""The Ray tasks of registration and preparation: inspect a file (hash, kind, pages) near the
data, read a source once per job, prepare one chunk per task, or the one-chunk jobs of several
small files in one task.

Kept apart from ``raybatch.shells.runtime`` so that these workers import only what they need.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import ray

from raybatch.collector import settle
from raybatch.errors import RaybatchError
from raybatch.inspection import Inspection, inspect_source, read_for_inspection
from raybatch.models import CachedPage, JobRecord, Priority
from raybatch.ocr import open_ocr
from raybatch.ocr.cache import CarriedPageTexts, PageTextLookup
from raybatch.reuse import settings_config
from raybatch.settings import OcrEngineName, PrepareTaskSettings, Settings, StoreSettings
from raybatch.sources import SourceFile, read_source_patiently
from raybatch.steps.chunk import ChunkPlan
from raybatch.work.prepare import ChunkPreparer, memory_estimate
from raybatch.work.prepared_chunk import ChunkSummary, PreparedChunk

if TYPE_CHECKING:  # the driver's: a task worker loads no database driver (raybatch.state)
    from raybatch.prepared import PreparedRequests


def _preparer(settings: PrepareTaskSettings) -> ChunkPreparer:
    """One preparer per worker process: the OCR engine's models load once."""
    key = settings.model_dump_json()  # any change of settings makes a new preparer
    cached = _WORKER_CACHE.get(key)
    if cached is None:
        # One thread: a prepare task holds 1/OCR_WORKERS of a CPU; parallelism comes from tasks.
        ocr = open_ocr(settings.ocr, threads=1)
        cached = _WORKER_CACHE[key] = ChunkPreparer(settings.prepare, settings.request, settings.ocr, ocr)
        settle()
    return cached


_WORKER_CACHE: dict[str, ChunkPreparer] = {}
# Ray has no task priorities: a backlog's tasks leave a sliver of each CPU free (URGENT_RESERVE) and
# urgent work asks for a sliver (URGENT_CPUS), so it starts beside them instead of behind them. It
# asks for some CPU all the same: a task asking for none may be placed on the head node, whose
# environment holds every secret (cluster.yaml gives the head 0 CPU). Its driver's caps bound it.
URGENT_CPUS = 0.01
URGENT_RESERVE = 0.02


def normal_cpus(ocr_workers: int) -> float:
    """The CPU a backlog's registration or prepare task asks for: its share, less the urgent sliver."""
    return (1.0 - URGENT_RESERVE) / ocr_workers


def keyless(store: StoreSettings) -> StoreSettings:
    """The store's settings without its keys: for the tasks that parse sources."""
    return store.model_copy(update={"s3_access_key": None, "s3_secret_key": None})


@ray.remote(max_retries=0)
def inspect_files(
    store: StoreSettings,
    max_page_pixels: int,
    sources: list[SourceFile],
    read: list[bytes | RaybatchError] | None,
) -> list[Inspection]:
    """Hash and open each file (read here if local, else given as ``read``); no bytes come back.
    Not retried: a file that crashed its reader would crash the next one too (the driver reads each
    file of a crashed task again, alone). It holds no secret: no API key, no database URL, no store
    keys (S3 files are read by ``read_files``). What it finds is recorded by the driver."""
    settle()
    return [
        inspect_source(source, store, max_page_pixels, None if read is None else read[n])
        for n, source in enumerate(sources)
    ]


@ray.remote(max_retries=0)
def read_files(store: StoreSettings, sources: list[SourceFile]) -> list[bytes | RaybatchError]:
    """The bytes of S3 files to inspect (or why they cannot be read): read with the store's keys by
    a task that parses nothing."""
    return [read_for_inspection(source, store) for source in sources]


class RayInspector:
    """Starts one registration task per group of files (and, for S3 files, a task reading them)."""

    def __init__(self, settings: Settings, *, urgent: bool = False) -> None:
        store = settings.section(StoreSettings)
        self._store = ray.put(store)
        self._keyless = ray.put(keyless(store))
        self._max_page_pixels = settings.max_page_pixels
        self._cpus = URGENT_CPUS if urgent else normal_cpus(settings.ocr_workers)

    def inspect(self, sources: Sequence[SourceFile]) -> Any:
        more = f" and {len(sources) - 1} more" if len(sources) > 1 else ""
        name = f"{sources[0].name[:80]}{more}"
        read: Any = None  # S3 files: a ref to their bytes, read by a task holding the store's keys
        if any(not source.uri.startswith("file:") for source in sources):
            read = read_files.options(name=f"read {name}", num_cpus=self._cpus).remote(
                self._store, list(sources)
            )
        task = inspect_files.options(name=f"register {name}", num_cpus=self._cpus)
        return task.remote(self._keyless, self._max_page_pixels, list(sources), read)


def _read(store: StoreSettings, uri: str, sha256: str) -> bytes:
    """A source's bytes, checked against its sha256 (S3 sources need the store's keys); an
    outage of the store is waited out within its budget."""
    return read_source_patiently(uri, store, sha256=sha256)


@ray.remote(max_retries=2)
def load_source(store: StoreSettings, uri: str, sha256: str) -> bytes:
    """Read a source's bytes into the object store, once for the chunks of a job."""
    return _read(store, uri, sha256)


@ray.remote(max_retries=2, retry_exceptions=False)
def prepare_chunk(
    settings: PrepareTaskSettings,
    job: JobRecord,
    plan: ChunkPlan,
    data: bytes | StoreSettings,
    known: tuple[CachedPage, ...],
) -> tuple[ChunkSummary, PreparedChunk]:
    """Render, read and package one chunk; ``known`` OCR reads are reused, new ones come back.
    Given the store's settings instead of the bytes (a local file: a job's only chunk, or a chunk of
    a small one), it reads the source; those settings never hold the store's keys (an S3 source is
    read by ``load_source``)."""
    if isinstance(data, StoreSettings):
        data = _read(data, job.source_uri, job.sha256)
    return _prepare(settings, job, plan, data, known)


def _prepare(
    settings: PrepareTaskSettings, job: JobRecord, plan: ChunkPlan, data: bytes, known: tuple[CachedPage, ...]
) -> tuple[ChunkSummary, PreparedChunk]:
    cache = CarriedPageTexts(known)
    chunk = _preparer(settings).prepare(job, plan, data, cache=cache)
    return chunk.summary(cache.added), chunk


@ray.remote(max_retries=0)
def prepare_chunks(
    settings: PrepareTaskSettings,
    store: StoreSettings,
    items: list[tuple[JobRecord, ChunkPlan]],
    known: list[tuple[CachedPage, ...]],
) -> tuple[Any, ...]:
    """Prepare the one chunk of each of several small local files, each read here: the outcome of
    each (its summary, or the exception it raised: a broken file fails its own job only), then each
    PreparedChunk (None where it failed), one return each. Not retried: the driver prepares each
    chunk of a crashed task again, alone. ``store`` holds no keys."""
    outcomes: list[ChunkSummary | Exception] = []
    chunks: list[PreparedChunk | None] = []
    for (job, plan), reads in zip(items, known, strict=True):
        try:
            summary, chunk = _prepare(settings, job, plan, _read(store, job.source_uri, job.sha256), reads)
        except Exception as exc:  # the job's own failure, for the driver to record
            outcomes.append(exc)
            chunks.append(None)
        else:
            outcomes.append(summary)
            chunks.append(chunk)
    return (outcomes, *chunks)


class RayPrepareTasks:
    """Launches the prepare stage's tasks with readable names and honest memory requests."""

    def __init__(
        self,
        settings: Settings,
        cache: PageTextLookup | None = None,
        kept: PreparedRequests | None = None,
    ) -> None:
        # Each task gets only what it uses: no API key or database URL; the store's keys only
        # where sources are read. The OCR cache and requests prepared ahead (``kept``, by
        # ``estimate``) are read and written here, on the driver.
        self._settings = ray.put(settings.for_prepare_tasks())
        store = settings.section(StoreSettings)
        self._store = ray.put(store)  # for the loads: they read, and parse nothing
        self._keyless = ray.put(keyless(store))
        self._cache = cache if settings.ocr_engine is not OcrEngineName.NONE else None
        self._cpus = normal_cpus(settings.ocr_workers)
        self._config = settings_config(settings)
        self._kept = kept

    def processing_key(self, job: JobRecord, n: int) -> str:
        return self._config.key(job.sha256, n)

    def stored(self, job: JobRecord, plan: ChunkPlan) -> tuple[Any, Any] | None:
        """Refs to a chunk prepared earlier and kept under the key it would get now, or None."""
        if self._kept is None:
            return None
        chunk = self._kept.load(job.id, plan.n, self.processing_key(job, plan.n))
        return None if chunk is None else (ray.put(chunk.summary()), ray.put(chunk))

    def load(self, job: JobRecord) -> Any:
        urgent = {"num_cpus": URGENT_CPUS} if job.priority is Priority.URGENT else {}
        task = load_source.options(name=f"load job_{job.id}", **urgent)
        return task.remote(self._store, job.source_uri, job.sha256)

    def prepare(self, job: JobRecord, plan: ChunkPlan, source: Any) -> tuple[Any, Any]:
        """A task preparing one chunk from the loaded ``source``, or, when it is None, reading a
        local source itself (a job's only chunk, or a chunk of a small file: no load task, no keys)."""
        options = {
            "name": f"prepare job_{job.id} chunk_{plan.n}",
            "memory": memory_estimate(job.size_bytes, len(plan.pages)),
            "num_cpus": URGENT_CPUS if job.priority is Priority.URGENT else self._cpus,
            "num_returns": 2,
        }
        known = tuple(self._cache.cached_page_texts(job.sha256, plan.pages)) if self._cache else ()
        if source is None and not job.source_uri.startswith("file:"):
            source = self.load(job)  # an S3 source needs the store's keys: read apart from the parsing
        data: Any = self._keyless if source is None else source
        refs: Any = prepare_chunk.options(**options).remote(self._settings, job, plan, data, known)
        summary, payload = refs  # num_returns=2: one ref each
        return summary, payload

    def prepare_group(self, items: Sequence[tuple[JobRecord, ChunkPlan]]) -> tuple[Any, list[Any]]:
        """One task preparing the one chunk of each of these small local files; its memory request
        counts every one of them (their payloads stay in the worker until it returns)."""
        jobs = [job for job, _ in items]
        options = {
            "name": f"prepare job_{jobs[0].id} and {len(jobs) - 1} more",
            "memory": memory_estimate(sum(j.size_bytes for j in jobs), sum(len(p.pages) for _, p in items)),
            "num_cpus": self._cpus,
            "num_returns": 1 + len(items),
        }
        found = self._cache.cached_page_texts_of({j.sha256 for j in jobs}) if self._cache else {}
        known = [tuple(c for c in found.get(j.sha256, ()) if c.text.page in p.pages) for j, p in items]
        task = prepare_chunks.options(**options)
        refs: Any = task.remote(self._settings, self._keyless, list(items), known)
        return refs[0], list(refs[1:])  # num_returns: the outcomes, then one ref per chunk
