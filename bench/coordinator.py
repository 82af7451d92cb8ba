"""The coordinator alone (a script, not a test): CPU, statements and transactions per job.

One ``BatchCoordinator`` in this process, driven by ``step`` over a SQLite state database of its own
(or ``--database-url``), against the built-in emulator in a process of its own answering at once:
``--jobs`` one-page jobs, prepared beforehand, are offered and stepped until answered. What it
counts is this process's CPU (the coordinator's threads: the emulator is elsewhere) and the SQL
statements and transactions it sent, from the first offer to the last job answered.

    .venv/bin/python bench/coordinator.py --jobs 300
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import subprocess
import sys
import tempfile
import time
from typing import Any

import ray  # noqa: F401  (the metrics import it; in the actor it is imported already)
import sqlalchemy as sa
from PIL import Image

from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.ids import sha256_bytes
from raybatch.models import JobStatus, PageText, RenderedPage, SourceKind
from raybatch.settings import ClaudeSettings, Modality, StateSettings
from raybatch.state import SqlStateStore, open_state
from raybatch.steps.build_requests import RequestConfig, build_request
from raybatch.work.prepared_chunk import PreparedChunk

CONFIG = RequestConfig(model="claude-test", max_tokens=4096, modality=Modality.TEXT, min_confidence=0.8)
TEXT = "INVOICE 2041\nAcme Tools Ltd\nTotal due: 1,204.00 EUR\n"


def _blank_jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (32, 45), "white").save(out, format="JPEG")
    return out.getvalue()


def prepared(state: SqlStateStore, count: int) -> dict[int, PreparedChunk]:
    """``count`` one-page jobs, registered and prepared, with their payloads."""
    jobs: dict[int, PreparedChunk] = {}
    stamp, blank = time.time(), _blank_jpeg()
    for i in range(count):
        sha = sha256_bytes(f"{stamp}:{i}".encode())
        job, _ = state.register_job(
            sha256=sha,
            source_uri=f"file:///{i}.pdf",
            source_name=f"{i}.pdf",
            kind=SourceKind.PDF,
            size_bytes=1,
        )
        state.transition(job.id, [JobStatus.PENDING], JobStatus.PREPARED, pages=1)
        page = RenderedPage(1, blank, "image/jpeg", 32, 45, PageText(1, TEXT, "layer"))
        jobs[job.id] = PreparedChunk(build_request(job.id, 0, sha, [page], config=CONFIG), {1: 0})
        state.save_chunks(job.id, [jobs[job.id].record()])
    return jobs


async def measure(
    claude: ClaudeSettings, state: SqlStateStore, jobs: dict[int, PreparedChunk]
) -> dict[str, Any]:
    counts = {"statements": 0, "transactions": 0}

    def statement(*_: Any) -> None:
        counts["statements"] += 1

    def transaction(*_: Any) -> None:
        counts["transactions"] += 1

    coord = BatchCoordinator(claude, state, autostart=False)
    await coord.step()  # the first beat and sweep: once per coordinator, not per job
    sa.event.listen(sa.engine.Engine, "before_cursor_execute", statement)
    sa.event.listen(sa.engine.Engine, "begin", transaction)
    cpu, wall = time.process_time(), time.perf_counter()
    for job_id, chunk in jobs.items():
        await coord.offer(job_id, {0: chunk}, "batch", chunk.request.encoded_size)
    await coord.flush()
    while True:
        await coord.step()
        if set(state.job_statuses(list(jobs)).values()) == {JobStatus.ANSWERED}:
            break
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    sa.event.remove(sa.engine.Engine, "before_cursor_execute", statement)
    sa.event.remove(sa.engine.Engine, "begin", transaction)
    await coord.stop()
    n = len(jobs)
    return {
        "jobs": n,
        "cpu_ms_per_job": round(1000 * cpu / n, 2),
        "wall_ms_per_job": round(1000 * wall / n, 2),
        "statements_per_job": round(counts["statements"] / n, 2),
        "transactions_per_job": round(counts["transactions"] / n, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    command = [sys.executable, "-m", "raybatch.cli", "emulator", "--port", "0", "--processing-seconds", "0"]
    emulator = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert emulator.stdout is not None
        url = emulator.stdout.readline().rsplit(" ", 1)[-1].strip()
        database = args.database_url or f"sqlite:///{tempfile.mkdtemp()}/state.db"
        state = open_state(StateSettings(database_url=database))
        claude = ClaudeSettings.model_validate(
            {"anthropic_base_url": url, "anthropic_api_key": "bench-key", "poll_interval": 0.05}
        )
        print(json.dumps(asyncio.run(measure(claude, state, prepared(state, args.jobs)))))
    finally:
        emulator.terminate()
        emulator.wait()


if __name__ == "__main__":
    main()
