"""The prepare stage's Ray tasks: read a source once per job, prepare one chunk per task.

Kept apart from ``raybatch.runtime`` so that prepare workers import only what preparing needs.
"""

from __future__ import annotations

from typing import Any

import ray

from raybatch.actors.prepare import ChunkPreparer, ChunkSummary, PreparedChunk, memory_estimate
from raybatch.ids import job_prefix
from raybatch.models import JobRecord
from raybatch.objects import open_store
from raybatch.ocr import open_ocr
from raybatch.prepared import load_prepared, prepared_key, save_prepared
from raybatch.reuse import settings_config
from raybatch.settings import (
    ClaudeSettings,
    OcrSettings,
    PrepareSettings,
    Settings,
    StateSettings,
    StoreSettings,
)
from raybatch.sources import read_source
from raybatch.state import SqlStateStore, open_state
from raybatch.steps.chunk import ChunkPlan


def _preparer(settings: Settings) -> tuple[ChunkPreparer, SqlStateStore]:
    """One preparer per worker process: the OCR engine's models load once."""
    key = settings.model_dump_json()  # any change of settings makes a new preparer
    cached = _WORKER_CACHE.get(key)
    if cached is None:
        state = open_state(settings.section(StateSettings))
        # One thread: a prepare task holds 1/OCR_WORKERS of a CPU; parallelism comes from tasks.
        ocr = open_ocr(settings.section(OcrSettings), threads=1)
        preparer = ChunkPreparer(
            settings.section(PrepareSettings),
            settings.section(ClaudeSettings),
            settings.section(OcrSettings),
            ocr,
            cache=state,
        )
        cached = _WORKER_CACHE[key] = (preparer, state)
    return cached


_WORKER_CACHE: dict[str, tuple[ChunkPreparer, SqlStateStore]] = {}


@ray.remote(max_retries=2)
def load_source(settings: Settings, uri: str) -> bytes:
    """Read a source's bytes into the object store, once per job."""
    return read_source(uri, settings.section(StoreSettings))


@ray.remote(max_retries=2, retry_exceptions=False)
def prepare_chunk(
    settings: Settings, job: JobRecord, plan: ChunkPlan, data: bytes, keep: bool = False
) -> tuple[ChunkSummary, PreparedChunk]:
    """Render, read and package one chunk; with ``keep``, also keep it in the object store."""
    preparer, _ = _preparer(settings)
    chunk = preparer.prepare(job, plan, data)
    if keep:
        save_prepared(open_store(settings.section(StoreSettings)), chunk)
    return chunk.summary(), chunk


class RayPrepareTasks:
    """Launches the prepare stage's tasks with readable names and honest memory requests."""

    def __init__(self, settings: Settings, *, keep: bool = False) -> None:
        self._settings = ray.put(settings)
        self._cpus = 1.0 / settings.ocr_workers
        self._config = settings_config(settings)
        self._keep = keep  # keep what is prepared in the object store (``estimate``)
        self._store = open_store(settings.section(StoreSettings))
        self._kept: dict[int, set[str]] = {}

    def processing_key(self, job: JobRecord, n: int) -> str:
        return self._config.key(job.sha256, n)

    def stored(self, job: JobRecord, plan: ChunkPlan) -> tuple[Any, Any] | None:
        """Refs to a chunk prepared earlier and kept under the key it would get now, or None."""
        if job.id not in self._kept:
            self._kept[job.id] = set(self._store.list(f"{job_prefix(job.id)}/prepared/"))
        if prepared_key(job.id, plan.n) not in self._kept[job.id]:
            return None
        chunk = load_prepared(self._store, job.id, plan.n, self.processing_key(job, plan.n))
        return None if chunk is None else (ray.put(chunk.summary()), ray.put(chunk))

    def load(self, job: JobRecord) -> Any:
        return load_source.options(name=f"load job_{job.id}").remote(self._settings, job.source_uri)

    def prepare(self, job: JobRecord, plan: ChunkPlan, source: Any) -> tuple[Any, Any]:
        options = {
            "name": f"prepare job_{job.id} chunk_{plan.n}",
            "memory": memory_estimate(job.size_bytes, len(plan.pages)),
            "num_cpus": self._cpus,
            "num_returns": 2,
        }
        task: Any = prepare_chunk.options(**options)
        refs = task.remote(self._settings, job, plan, source, self._keep)
        summary, payload = refs  # num_returns=2: one ref each
        return summary, payload
