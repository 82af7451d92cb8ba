"""The pure parts of the pipeline benchmark: the single-process loop, the figures, the report.

Nothing here starts Ray: ``bench/run.py`` measures the Ray stages (``bench/stages.py``) and hands
their timings to ``figures``; ``tests/test_bench_smoke.py`` runs this module on a one-page input.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raybatch.ids import sha256_bytes
from raybatch.models import JobRecord, JobStatus, SourceKind
from raybatch.settings import ClaudeSettings, OcrSettings, PrepareSettings, Settings
from raybatch.steps.chunk import ChunkPlan, plan_chunks
from raybatch.steps.open_source import open_source
from raybatch.steps.pack import megabytes
from raybatch.units import MB
from raybatch.work.prepare import ChunkPreparer

REQUIRED_KEYS = (
    "cores",
    "single_process_pages_per_s",
    "prepare_pages_per_s",
    "prepare_efficiency",
    "e2e_over_prepare",
    "batches",
    "batches_lower_bound",
    "writer_peak_mb",
    "max_concurrent_mb",
)


@dataclass(frozen=True)
class Timing:
    """Pages done in so many seconds, and the request bytes they became."""

    pages: int
    seconds: float
    request_bytes: int = 0

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class EndToEnd:
    """What a full run with the zero-latency emulator measured."""

    seconds: float
    jobs: int
    failed: int
    batches: int
    request_bytes: int
    writer_peak_mb: float  # all writer processes together, sampled
    writer_idle_mb: float  # the same before any write
    writer_report_peak_mb: float  # the largest one writer reported (its ru_maxrss)
    sources_peak_mb: float  # source MB the writers held at once, from the write intervals
    write_seconds: float = 0.0  # the writers' busy time, summed over jobs
    writers: int = 0  # writer processes the run started (RESULT_WORKERS at most)
    first_chunk_at: float | None = None  # seconds into the run when the first chunk was prepared
    prepared_at: float | None = None  # ... when every page was prepared
    answered_at: float | None = None  # ... and when every job had its answers


def source_job(path: Path, job_id: int = 1) -> tuple[JobRecord, bytes]:
    """A job record for a local PDF, as registration would make it, and its bytes."""
    data = path.read_bytes()
    with open_source(data, SourceKind.PDF, max_page_pixels=PrepareSettings().max_page_pixels) as doc:
        pages = doc.page_count
    job = JobRecord(
        id=job_id,
        sha256=sha256_bytes(data),
        source_uri=str(path),
        source_name=path.name,
        kind=SourceKind.PDF,
        size_bytes=len(data),
        status=JobStatus.PREPARING,
        pages=pages,
    )
    return job, data


def single_process(
    settings: Settings, paths: Sequence[Path], clock: Callable[[], float] = time.perf_counter
) -> Timing:
    """Prepare every chunk of every file in this process, one after another: the per-core limit."""
    preparer = ChunkPreparer(
        settings.section(PrepareSettings),
        settings.section(ClaudeSettings),
        settings.section(OcrSettings),
        None,
    )
    sources = [source_job(path, i) for i, path in enumerate(paths, start=1)]
    job, data = sources[0]
    preparer.prepare(job, ChunkPlan(0, 1, 1), data)  # first-use costs (fonts, codecs) are not timed
    pages = size = 0
    started = clock()
    for job, data in sources:
        for plan in plan_chunks(job.pages or 0):
            chunk = preparer.prepare(job, plan, data)
            pages += len(plan.pages)
            size += chunk.request.encoded_size
    return Timing(pages, clock() - started, size)


def batches_lower_bound(request_bytes: int, batch_max_mb: float) -> int:
    """⌈total request bytes / batch limit⌉: no packing can do with fewer batches."""
    return math.ceil(request_bytes / megabytes(batch_max_mb)) if request_bytes else 0


def sources_peak_mb(intervals: Iterable[tuple[float, float, float]]) -> float:
    """The most source MB held at once, from (started, ended, MB) write intervals."""
    events = sorted(
        (moment, delta) for start, end, mb in intervals for moment, delta in ((start, mb), (end, -mb))
    )  # at equal moments the release (negative) sorts first
    held = peak = 0.0
    for _, delta in events:
        held += delta
        peak = max(peak, held)
    return peak


def figures(settings: Settings, cores: int, single: Timing, prepare: Timing, e2e: EndToEnd) -> dict[str, Any]:
    """The benchmark's JSON object."""
    efficiency = prepare.pages_per_s / (cores * single.pages_per_s) if single.pages_per_s else 0.0
    return {
        "cores": cores,
        "pages": prepare.pages,
        "ocr_engine": settings.ocr_engine.value,
        "single_process_pages_per_s": round(single.pages_per_s, 2),
        "prepare_pages_per_s": round(prepare.pages_per_s, 2),
        "prepare_efficiency": round(efficiency, 3),
        "prepare_seconds": round(prepare.seconds, 2),
        "e2e_seconds": round(e2e.seconds, 2),
        "e2e_over_prepare": round(e2e.seconds / prepare.seconds, 2) if prepare.seconds else None,
        "e2e_first_chunk_at_s": _round(e2e.first_chunk_at),
        "e2e_prepared_at_s": _round(e2e.prepared_at),
        "e2e_answered_at_s": _round(e2e.answered_at),
        "e2e_write_seconds": round(e2e.write_seconds, 2),
        "jobs": e2e.jobs,
        "jobs_failed": e2e.failed,
        "request_mb": round(e2e.request_bytes / MB, 2),
        "batch_max_mb": settings.batch_max_mb,
        "batches": e2e.batches,
        "batches_lower_bound": batches_lower_bound(e2e.request_bytes, settings.batch_max_mb),
        "writer_peak_mb": round(e2e.writer_peak_mb, 1),
        "writer_idle_mb": round(e2e.writer_idle_mb, 1),
        "writer_report_peak_mb": round(e2e.writer_report_peak_mb, 1),
        "writer_sources_peak_mb": round(e2e.sources_peak_mb, 2),
        "writers_started": e2e.writers,
        "result_workers": settings.result_workers,
        "max_concurrent_mb": settings.max_concurrent_mb,
        "poll_interval": settings.poll_interval,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def report(result: dict[str, Any], say: Callable[[str], None] = print) -> None:
    """Human-readable lines, then the JSON object alone on the last line."""
    r = result
    say(f"cores: {r['cores']}   pages: {r['pages']}   OCR: {r['ocr_engine']}")
    say(f"single process (render + encode): {r['single_process_pages_per_s']:.2f} pages/s")
    say(
        f"Ray prepare stage: {r['prepare_pages_per_s']:.2f} pages/s in {r['prepare_seconds']:.1f} s; "
        f"efficiency {r['prepare_efficiency']:.2f} of cores x single"
    )
    say(
        f"end to end, zero-latency emulator: {r['e2e_seconds']:.1f} s = {r['e2e_over_prepare']}x prepare "
        f"(first chunk prepared at {r['e2e_first_chunk_at_s']} s, all pages at {r['e2e_prepared_at_s']} s, "
        f"all answered at {r['e2e_answered_at_s']} s; writers busy {r['e2e_write_seconds']} s in all)"
    )
    say(
        f"batches: {r['batches']} for {r['request_mb']:.1f} MB of requests at {r['batch_max_mb']} MB each "
        f"(lower bound {r['batches_lower_bound']})"
    )
    say(
        f"writers ({r['writers_started']} started of RESULT_WORKERS {r['result_workers']}): "
        f"peak RSS {r['writer_peak_mb']:.0f} MB together "
        f"({r['writer_idle_mb']:.0f} MB idle), sources held at once {r['writer_sources_peak_mb']:.1f} MB; "
        f"MAX_CONCURRENT_MB {r['max_concurrent_mb']}"
    )
    say(json.dumps(result, sort_keys=False))
