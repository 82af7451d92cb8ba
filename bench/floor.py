"""The floor of the small-files benchmark: each file's own work and nothing else, on a process pool.

Per file, in a pool process: read and hash it, open it, extract its text and build its request
(raybatch's own ``ChunkPreparer``: the request JSON, and a page drawn only when its image is sent,
as in a run), slice the page into its own PDF, draw and encode the WebP thumbnail, write the PDF,
the thumbnail and a manifest. Then, for
all files at once, one database insert (SQLite) and one Parquet file. No Ray, no lease, no
coordinator: what raybatch does on top of this is what ``e2e_over_floor`` prices.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from measure import source_job

from raybatch.settings import ClaudeSettings, OcrSettings, PrepareSettings, Settings
from raybatch.steps.chunk import ChunkPlan
from raybatch.steps.open_source import open_source
from raybatch.steps.slice import slice_document
from raybatch.steps.thumbnail import thumbnail
from raybatch.work.prepare import ChunkPreparer

_PREPARER: list[ChunkPreparer] = []  # one per pool process, built by ``_start``


@dataclass(frozen=True)
class Floor:
    """The floor's wall-clock time and the CPU its processes used (the pool's and this one's)."""

    files: int
    seconds: float
    cpu_seconds: float

    @property
    def files_per_s(self) -> float:
        return self.files / self.seconds if self.seconds > 0 else 0.0


def _start(settings: Settings) -> None:
    _PREPARER.append(
        ChunkPreparer(
            settings.section(PrepareSettings),
            settings.section(ClaudeSettings),
            settings.section(OcrSettings),
            None,
        )
    )


def _one(path: Path, index: int, out: Path) -> tuple[dict[str, Any], float]:
    """One file's work; its row and the CPU seconds it took."""
    cpu = time.process_time()
    job, data = source_job(path, index)  # read, hash, open (the page count)
    hashlib.sha256(data).hexdigest()
    chunk = _PREPARER[0].prepare(job, ChunkPlan(0, 1, job.pages or 1), data)  # text, render, request
    with open_source(data, job.kind, max_page_pixels=PrepareSettings().max_page_pixels) as doc:
        pdf = slice_document(doc, 1, doc.page_count, {})
    thumb = thumbnail(pdf)
    folder = out / f"{index:07d}"
    folder.mkdir(parents=True)
    (folder / "0.pdf").write_bytes(pdf)
    (folder / "0.webp").write_bytes(thumb)
    row = {
        "job_id": index,
        "sha256": job.sha256,
        "pages": job.pages,
        "request_bytes": chunk.request.encoded_size,
    }
    (folder / "manifest.json").write_text(json.dumps({**row, "documents": [{"pdf": "0.pdf"}]}))
    return row, time.process_time() - cpu


def _many(paths: list[Path], first: int, out: Path) -> tuple[list[dict[str, Any]], float]:
    done = [_one(path, first + i, out) for i, path in enumerate(paths)]
    return [row for row, _ in done], sum(cpu for _, cpu in done)


def floor(settings: Settings, paths: list[Path], out: Path, processes: int, per_call: int = 16) -> Floor:
    """Every file's own work on ``processes`` pool processes (started before the clock runs)."""
    groups = [paths[i : i + per_call] for i in range(0, len(paths), per_call)]
    with ProcessPoolExecutor(processes, initializer=_start, initargs=(settings,)) as pool:
        list(pool.map(_many, [[paths[0]]] * processes, range(processes), [out / "warm"] * processes))
        started, cpu = time.perf_counter(), time.process_time()
        results = list(pool.map(_many, groups, range(0, len(paths), per_call), [out / "files"] * len(groups)))
        rows = [row for group, _ in results for row in group]
        _insert(out / "floor.db", rows)
        pq.write_table(pa.Table.from_pylist(rows), out / "documents.parquet", compression="zstd")
        seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu + sum(spent for _, spent in results)
    return Floor(len(rows), seconds, cpu_seconds)


def _insert(path: Path, rows: list[dict[str, Any]]) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE documents (job_id INTEGER, sha256 TEXT, pages INTEGER, request_bytes INTEGER)"
        )
        conn.executemany(
            "INSERT INTO documents VALUES (:job_id, :sha256, :pages, :request_bytes)",
            rows,
        )
    conn.close()


def processes() -> int:
    """Pool processes: one per core this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
