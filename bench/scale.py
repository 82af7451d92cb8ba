"""The scale benchmark (a script, not a test): many small files, and a driver tick on a huge backlog.

    python bench/scale.py --quick        # 2,000 one-page text PDFs; 1,000 vs 1,000,000 jobs
    python bench/scale.py --files 500 --big-jobs 100000

On a local Ray of its own, with the built-in emulator answering at once (zero processing time):
  floor_files_per_s        each file's own work and nothing else, on a process pool (bench/floor.py)
  e2e_over_floor           e2e_files_per_s / floor_files_per_s: 1.0 = raybatch costs nothing on top
  prepare_files_per_s      the prepare stage alone on the files (Ray tasks, as a run launches them)
  write_files_per_s        the write stage alone on the same files, answers already there
  e2e_files_per_s          a whole run of the files: register, prepare, batch, answer, write
  e2e_efficiency           e2e_files_per_s x (1/prepare + 1/write): 1.0 = nothing lost between stages
  first_request_at_s       seconds from the run's start until its first request (chunk) was prepared
  driver_cpu_ms_per_job    CPU time of the driver's thread during the run, per job
  driver_loop_cpu_ms_per_job  of it, the driver's loop alone (what grows with the jobs); the rest is
                           the run's start and end, once a run (a new database made, the table compacted)
  cpu_ms_per_job           CPU of the run's processes by stage, per job (bench/stage_cpu.py): the
                           driver's thread, tasks (registration and prepare), coordinator, writers,
                           ray (Ray's own); prepare_alone_cpu_ms_per_job: the task workers' CPU in
                           the prepare stage alone (so registration is about tasks minus that);
                           floor_cpu_ms_per_job: the floor's
  db_statements_per_job    SQL statements the driver process sent during the run, per job
  tick_ms_1k, tick_ms_1m   one driver step's database work on a state DB of 1,000 and of 1,000,000
                           jobs (SQLite; PostgreSQL too when RAYBATCH_TEST_DATABASE_URL is set)
Human-readable lines first, then one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pymupdf
import sqlalchemy as sa
from floor import floor, processes
from pydantic import SecretStr
from stage_cpu import StageCpu
from stages import cores, in_folder, prepare_only, ray_environment, warm_up

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.ids import OutputKeys
from raybatch.models import JobStatus
from raybatch.settings import Settings, StateSettings, load_settings
from raybatch.state import SqlStateStore, open_state

REQUIRED_KEYS = (
    "cores",
    "files",
    "floor_files_per_s",
    "e2e_over_floor",
    "e2e_files_per_s",
    "prepare_files_per_s",
    "write_files_per_s",
    "e2e_efficiency",
    "first_request_at_s",
    "driver_cpu_ms_per_job",
    "driver_loop_cpu_ms_per_job",
    "cpu_ms_per_job",
    "prepare_alone_cpu_ms_per_job",
    "floor_cpu_ms_per_job",
    "table_files",
    "documents_per_table_file",
    "db_statements_per_job",
    "tick_ms_1k",
    "tick_ms_1m",
)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2,000 files, 1,000,000 synthetic jobs")
    parser.add_argument("--files", type=int, default=None, help="one-page PDFs (default 2,000)")
    parser.add_argument("--big-jobs", type=int, default=1_000_000, help="jobs in the large synthetic DB")
    parser.add_argument("--ticks", type=int, default=30, help="steps timed per database (median)")
    return parser.parse_args(argv)


def write_files(folder: Path, count: int) -> list[Path]:
    """``count`` one-page PDFs with a text layer, each different (so each is its own job)."""
    folder.mkdir(parents=True)
    paths = []
    for n in range(count):
        doc = pymupdf.open()
        page = doc.new_page()
        page.insert_text((72, 72), f"INVOICE No. {n:06d}", fontsize=14)
        page.insert_text((72, 100), f"Counterparty: Supplier {n % 37}  Amount: {100 + n}.00 EUR")
        path = folder / f"file_{n:06d}.pdf"
        doc.save(path)
        doc.close()
        paths.append(path)
    return paths


def bench_settings(home: Path) -> Settings:
    settings = load_settings(raybatch_home=home, ocr_engine="none", poll_interval=0.5)
    return settings.model_copy(update={"ray_address": None})


class Counted:
    """SQL statements sent by this process and CPU time of the calling thread, while in the block."""

    def __init__(self) -> None:
        self.statements = 0
        self.cpu_s = 0.0

    def _count(self, *args: Any) -> None:
        self.statements += 1

    def __enter__(self) -> Counted:
        sa.event.listen(sa.engine.Engine, "before_cursor_execute", self._count)
        self._cpu = time.thread_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cpu_s = time.thread_time() - self._cpu
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", self._count)


class LoopCpu:
    """CPU time of the calling thread inside ``Driver.run`` (the driver's loop), while in the block."""

    def __enter__(self) -> LoopCpu:
        from raybatch.loops.driver import Driver

        self.cpu_s, self._run = 0.0, Driver.run
        original = self._run

        def timed(driver: Driver, *args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return original(driver, *args, **kwargs)
            finally:
                self.cpu_s += time.thread_time() - started

        Driver.run = timed  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        from raybatch.loops.driver import Driver

        Driver.run = self._run  # type: ignore[method-assign]


def whole_run(settings: Settings, folder: Path) -> dict[str, Any]:
    """A run of the folder against an emulator that answers at once."""
    from raybatch.pipeline import run

    first: list[float] = []
    with EmulatorServer(EmulatorConfig(processing_seconds=0.0)) as server:
        update = {"anthropic_base_url": server.base_url, "anthropic_api_key": SecretStr("bench")}
        settings = settings.model_copy(update={**update, "raybatch_emulator": True})
        started = time.perf_counter()

        def see(progress: Any) -> None:
            if not first and progress.pages_prepared:
                first.append(time.perf_counter() - started)

        with Counted() as counted, StageCpu() as stages, LoopCpu() as loop:
            report = run(settings, str(folder), dashboard=False, on_progress=see)
    jobs = len(report.jobs)
    return {
        **table_figures(settings),
        "seconds": report.elapsed,
        "jobs": jobs,
        "failed": len(report.failed),
        "first_request_at_s": first[0] if first else None,
        "driver_cpu_ms_per_job": 1000 * counted.cpu_s / max(1, jobs),
        "driver_loop_cpu_ms_per_job": 1000 * loop.cpu_s / max(1, jobs),
        "cpu_ms_per_job": stages.ms_per_job(jobs),
        "db_statements_per_job": counted.statements / max(1, jobs),
        "settings": settings,
    }


def table_figures(settings: Settings) -> dict[str, Any]:
    """The documents table after the run: its files, and documents per file (goal: 500 or more)."""
    from raybatch.objects import open_store
    from raybatch.settings import StoreSettings
    from raybatch.work.table_sink import TableSink

    state = open_state(settings.section(StateSettings))
    files = TableSink(open_store(settings.section(StoreSettings)), OutputKeys(state.database_id())).files()
    documents = len(state.list_documents())
    return {"table_files": len(files), "documents_per_table_file": documents / max(1, len(files))}


def write_only(settings: Settings) -> float:
    """The run's completed jobs written again from their answers by the writer pool alone; seconds."""
    import ray

    from raybatch.loops.writer_pool import WriterPool
    from raybatch.shells.writers import start_writers

    state = open_state(settings.section(StateSettings))
    done = [j.id for j in state.list_jobs([JobStatus.COMPLETED])]
    for job_id in done:
        state.transition(job_id, [JobStatus.COMPLETED], JobStatus.ANSWERED)
    handles = start_writers(settings, uuid.uuid4().hex[:8])
    ray.get([h.__ray_ready__.remote() for h in handles])  # started before the clock runs
    pool = WriterPool(
        handles,
        state,
        budget_mb=settings.max_concurrent_mb,
        worker_id="bench-writers",
        lease_seconds=600,
        max_attempts=3,
    )
    started = time.perf_counter()
    try:
        while True:
            answered = state.list_jobs([JobStatus.ANSWERED], limit=len(handles) + 8)
            if not answered and not pool.busy:
                break
            pool.tick(answered)
            refs = list(pool._running)
            if refs:
                ray.wait(refs, num_returns=1, timeout=1.0)
    finally:
        for handle in handles:
            ray.kill(handle)
    return time.perf_counter() - started


# One driver step's database work on a large backlog.
def synthetic_sqlite(path: Path, count: int) -> str:
    """A state DB of ``count`` jobs: a backlog of pending ones, a few in every later status."""
    url = f"sqlite:///{path}"
    open_state(StateSettings(database_url=url)).close()
    now = datetime.now(UTC).isoformat()
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO jobs (sha256, dedupe_key, source_uri, source_name, kind, size_bytes, mode, status,"
            " pages, progress, attempts, lease_token, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, 'pdf', 1000, 'batch', ?, 1, 0, 0, 0, ?, ?)",
            (
                (f"{n:064x}", f"{n:064x}", f"file:///{n}.pdf", f"{n}.pdf", _status(n, count), now, now)
                for n in range(count)
            ),
        )
    return url


def synthetic_postgres(base: str, count: int) -> tuple[str, Callable[[], None]]:
    """The same jobs in a schema of their own on PostgreSQL; returns its URL and a cleanup."""
    schema = f"scale_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(base)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    url = sa.make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
    text = url.render_as_string(hide_password=False)
    open_state(StateSettings(database_url=text)).close()
    now = datetime.now(UTC)
    engine = sa.create_engine(text)
    with engine.begin() as conn:
        raw = conn.connection.dbapi_connection
        with (
            raw.cursor() as cur,
            cur.copy(  # type: ignore[union-attr]
                "COPY jobs (sha256, dedupe_key, source_uri, source_name, kind, size_bytes, mode, status,"
                " pages, progress, attempts, lease_token, created_at, updated_at) FROM STDIN"
            ) as copy,
        ):
            for n in range(count):
                copy.write_row(
                    (
                        f"{n:064x}",
                        f"{n:064x}",
                        f"file:///{n}.pdf",
                        f"{n}.pdf",
                        "pdf",
                        1000,
                        "batch",
                        _status(n, count),
                        1,
                        0.0,
                        0,
                        0,
                        now,
                        now,
                    )
                )
        conn.execute(sa.text("ANALYZE jobs"))
    engine.dispose()

    def drop() -> None:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()

    return text, drop


def _status(n: int, count: int) -> str:
    """The last 200 jobs are spread over the later statuses; the rest is the pending backlog."""
    tail = count - n
    if tail > 200:
        return JobStatus.PENDING.value
    return [JobStatus.PREPARED, JobStatus.SUBMITTED, JobStatus.ANSWERED, JobStatus.COMPLETED][tail % 4].value


def tick_ms(url: str, count: int, ticks: int, window: int = 16, writers: int = 2) -> float:
    """The median time of one driver step's database work, as the driver does it."""
    state = SqlStateStore.from_url(url)
    ids = list(range(1, count + 1))
    steps = _driver_steps(state, ids, window, writers)
    next(steps)  # the first step warms the connection pool
    times = []
    for _ in range(ticks):
        started = time.perf_counter()
        next(steps)
        times.append(time.perf_counter() - started)
    state.close()
    return 1000 * statistics.median(times)


def _driver_steps(state: SqlStateStore, ids: list[int], window: int, writers: int) -> Iterator[None]:
    """The database work of the driver's steps: a slice of the run looked at, claims in the window,
    answered jobs for the writers, every lease renewed. A step finishes one held job, as a busy run
    does, so the window refills."""
    from raybatch.loops.driver import SWEEP_MARGIN_SECONDS, SWEEP_SECONDS, SWEEP_SIZE

    changed = SWEEP_SECONDS + SWEEP_MARGIN_SECONDS  # a sweep between two full ones reads what changed

    queue = iter(ids)
    held: list[Any] = []
    cursor = 0
    while True:
        state.glance_jobs(ids[cursor : cursor + SWEEP_SIZE], changed_within=changed)  # as the driver sweeps
        cursor = (cursor + SWEEP_SIZE) % len(ids)
        room = window - len(held)
        wanted = [next(queue) for _ in range(room)]
        held += state.claim_jobs(
            worker_id="bench",
            from_statuses=[JobStatus.PENDING],
            to_status=JobStatus.PREPARING,
            lease_seconds=600,
            limit=len(wanted),
            job_ids=wanted,
        )
        state.claimable_jobs([JobStatus.ANSWERED], JobStatus.WRITING, limit=writers + 4)
        held = state.renew_leases(held, 600)
        state.finish_claim(held.pop(0), JobStatus.PREPARED)
        yield


def tick_figures(home: Path, big: int, ticks: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, count in (("1k", 1000), ("1m", big)):
        started = time.perf_counter()
        url = synthetic_sqlite(home / f"tick_{label}.db", count)
        print(f"synthetic SQLite DB of {count} jobs in {time.perf_counter() - started:.0f} s", flush=True)
        out[f"tick_ms_{label}"] = tick_ms(url, count, ticks)
        (home / f"tick_{label}.db").unlink()
    base = os.environ.get("RAYBATCH_TEST_DATABASE_URL")
    if base:
        for label, count in (("1k", 1000), ("1m", big)):
            url, drop = synthetic_postgres(base, count)
            try:
                out[f"postgres_tick_ms_{label}"] = tick_ms(url, count, ticks)
            finally:
                drop()
    return out


def measure(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    import ray

    from raybatch.shells.runtime import connect

    count = args.files or 2000
    started = time.perf_counter()
    paths = write_files(home / "files", count)
    print(f"{count} one-page PDFs written in {time.perf_counter() - started:.1f} s", flush=True)
    settings = bench_settings(home)
    bare = floor(settings, paths, home / "floor", processes())
    print(f"floor: {count} files in {bare.seconds:.1f} s on {processes()} processes", flush=True)
    connect(settings, dashboard=False)
    try:
        cpus = cores()
        warm_up(in_folder(settings, home / "warm"), paths[0], 2 * cpus)
        with StageCpu() as prepare_cpu:
            prepare = prepare_only(in_folder(settings, home / "prepare"), paths)
        print(f"prepare stage alone: {count} files in {prepare.seconds:.1f} s", flush=True)
        e2e = whole_run(in_folder(settings, home / "e2e"), home / "files")
        print(f"whole run: {e2e['jobs']} jobs ({e2e['failed']} failed) in {e2e['seconds']:.1f} s", flush=True)
        write_s = write_only(e2e["settings"])
        print(f"write stage alone: {count} files in {write_s:.1f} s", flush=True)
    finally:
        ray.shutdown()
    result: dict[str, Any] = {
        "cores": cpus,
        "files": count,
        "jobs_failed": e2e["failed"],
        "floor_files_per_s": bare.files_per_s,
        "floor_cpu_ms_per_job": 1000 * bare.cpu_seconds / count,
        "e2e_over_floor": count / e2e["seconds"] / bare.files_per_s,
        "e2e_files_per_s": count / e2e["seconds"],
        "prepare_files_per_s": count / prepare.seconds,
        "write_files_per_s": count / write_s,
        "first_request_at_s": e2e["first_request_at_s"],
        "driver_cpu_ms_per_job": e2e["driver_cpu_ms_per_job"],
        "driver_loop_cpu_ms_per_job": e2e["driver_loop_cpu_ms_per_job"],
        "cpu_ms_per_job": {"driver": e2e["driver_cpu_ms_per_job"], **e2e["cpu_ms_per_job"]},
        "prepare_alone_cpu_ms_per_job": prepare_cpu.ms_per_job(count).get("tasks", 0.0),
        "db_statements_per_job": e2e["db_statements_per_job"],
        "table_files": e2e["table_files"],
        "documents_per_table_file": e2e["documents_per_table_file"],
    }
    result["e2e_efficiency"] = result["e2e_files_per_s"] * (
        1 / result["prepare_files_per_s"] + 1 / result["write_files_per_s"]
    )
    result |= tick_figures(home, args.big_jobs, args.ticks)
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    ray_environment()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="raybatch-scale-") as tmp:
        result = measure(args, Path(tmp))
    result["load_average_1m"] = [round(load, 2) for load in (load_before, os.getloadavg()[0])]
    result = {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}
    for key in REQUIRED_KEYS:
        print(f"{key:24} {result.get(key)}")
    print(json.dumps(result, sort_keys=True))
    return 0 if result["jobs_failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
