"""The Ray side of the pipeline benchmark: the prepare stage alone, and a whole run.

Both use the pipeline's own parts: ``PrepareScheduler`` driving ``RayPrepareTasks`` (tasks in flight
under the same cap as a run), and ``raybatch.pipeline.run`` against a zero-latency emulator. Each
gets its own SQLite file and store folder.
"""

from __future__ import annotations

import compileall
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import psutil
import ray
from measure import EndToEnd, Timing, source_job, sources_peak_mb
from pydantic import SecretStr

import raybatch
from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.loops.driver import Progress
from raybatch.loops.scheduler import GROUP_CHUNKS, SAVE_JOBS, SAVE_SECONDS, PrepareScheduler
from raybatch.models import JobStatus
from raybatch.pipeline import run, wait_any
from raybatch.register import Registrar
from raybatch.settings import SecretUrl, Settings, StateSettings, StoreSettings
from raybatch.shells.tasks import RayPrepareTasks, prepare_chunk
from raybatch.sources import list_sources
from raybatch.state import open_state
from raybatch.steps.chunk import ChunkPlan
from raybatch.units import MIB

WRITER_TITLE = "ray::WriterActor"  # Ray's process title for the writer actors (".write" while busy)


def in_folder(settings: Settings, folder: Path) -> Settings:
    """The settings with a state DB and a store of their own under ``folder``."""
    return settings.model_copy(
        update={"database_url": SecretUrl(f"sqlite:///{folder / 'state.db'}"), "store": str(folder / "store")}
    )


def cores() -> int:
    """CPUs the local Ray offers."""
    return int(ray.cluster_resources().get("CPU", 1))


def warm_up(settings: Settings, path: Path, tasks: int) -> None:
    """Start the worker processes and their imports before anything is timed."""
    job, data = source_job(path)
    ref = ray.put(data)
    task_settings = settings.for_prepare_tasks()
    ray.get([prepare_chunk.remote(task_settings, job, ChunkPlan(0, 1, 1), ref, ()) for _ in range(tasks)])


def prepare_only(settings: Settings, paths: Sequence[Path], tick: float = 0.5) -> Timing:
    """Every chunk of ``paths`` through the Ray prepare tasks, as a run launches them and waits for
    them (on the tasks in flight, not polling: a poll's CPU would be taken from the tasks), timed."""
    state = open_state(settings.section(StateSettings))
    jobs = _register(settings, paths)
    scheduler = PrepareScheduler(
        state,
        RayPrepareTasks(settings, cache=state),
        worker_id="bench",
        max_in_flight=settings.prepare_in_flight or 2 * cores(),
        max_backlog_bytes=1 << 62,  # nothing drains a backlog here: only the in-flight cap bounds
        lease_seconds=600,
        max_attempts=settings.prepare_max_attempts,
        # as a run has them: small files' jobs in groups, prepared chunks saved together
        save_jobs=SAVE_JOBS,
        save_seconds=SAVE_SECONDS,
        group_chunks=GROUP_CHUNKS,
    )
    ready: set[int] = set()
    request_bytes = 0
    started = time.perf_counter()
    scheduler.claim(jobs)
    while True:
        for job in scheduler.tick(0):
            ready.add(job.job_id)
            request_bytes += job.request_bytes
        if len(ready) == len(jobs) or scheduler.idle:
            break
        if scheduler.refs:
            wait_any(scheduler.refs, scheduler.wake_in(tick))
        else:  # chunks prepared, not yet saved
            time.sleep(scheduler.wake_in(tick))
    seconds = time.perf_counter() - started
    if len(ready) < len(jobs):
        raise RuntimeError(f"only {len(ready)} of {len(jobs)} jobs were prepared")
    return Timing(scheduler.pages_prepared, seconds, request_bytes)


def _register(settings: Settings, paths: Sequence[Path]) -> list[int]:
    state = open_state(settings.section(StateSettings))
    registrar = Registrar(state, settings.section(StoreSettings), max_page_pixels=settings.max_page_pixels)
    listing = list_sources([str(p) for p in paths], settings.section(StoreSettings))
    return [r.job.id for r in registrar.register_all(listing.files)]


def end_to_end(settings: Settings, paths: Sequence[Path]) -> EndToEnd:
    """A whole run of ``paths`` with an emulator that ends batches at once; writers' memory sampled."""
    sampler, phases = WriterMemory(), Phases(len(paths))
    with EmulatorServer(EmulatorConfig(processing_seconds=0.0)) as server:
        settings = settings.model_copy(
            update={"anthropic_base_url": server.base_url, "anthropic_api_key": SecretStr("bench")}
        )
        with sampler:
            result = run(settings, [str(p) for p in paths], dashboard=False, on_progress=phases.see)
    state = open_state(settings.section(StateSettings))
    chunks = [c for job in result.jobs for c in state.get_chunks(job.id)]
    writes = result.writes
    return EndToEnd(
        seconds=result.elapsed,
        jobs=len(result.jobs),
        failed=sum(j.status is JobStatus.FAILED for j in result.jobs),
        batches=len(state.known_batch_ids()),
        request_bytes=sum(c.request_bytes or 0 for c in chunks),
        writer_peak_mb=sampler.peak_mb,
        writer_idle_mb=sampler.idle_mb,
        writer_report_peak_mb=max((w.peak_rss_mb for w in writes), default=0.0),
        sources_peak_mb=sources_peak_mb((w.started, w.ended, w.source_mb) for w in writes),
        write_seconds=sum(w.ended - w.started for w in writes),
        writers=sampler.most,
        first_chunk_at=phases.first_chunk_at,
        prepared_at=phases.prepared_at,
        answered_at=phases.answered_at,
    )


class Phases:
    """When, since the run began, the first chunk was prepared, every page, and every job answered."""

    _BEFORE_ANSWER = frozenset({"pending", "preparing", "prepared", "submitted"})

    def __init__(self, files: int) -> None:
        self._files = files  # jobs register while the run goes on: the totals grow until then
        self._started = time.perf_counter()
        self.first_chunk_at: float | None = None
        self.prepared_at: float | None = None
        self.answered_at: float | None = None

    def see(self, progress: Progress) -> None:
        now = time.perf_counter() - self._started
        if self.first_chunk_at is None and progress.pages_prepared:
            self.first_chunk_at = now
        if progress.total < self._files:
            return
        if self.prepared_at is None and progress.pages_prepared >= progress.pages_total:
            self.prepared_at = now
        waiting = sum(progress.by_status.get(s, 0) for s in self._BEFORE_ANSWER)
        if self.answered_at is None and not waiting:
            self.answered_at = now


class WriterMemory:
    """Samples the summed RSS of the writer actor processes on this machine while a run goes on.

    Cheap, so that it does not slow the run it measures: the writers are looked for among this
    process's descendants once every ``find_every`` seconds, and only their memory is read between.
    """

    def __init__(self, every: float = 0.05, find_every: float = 0.5) -> None:
        self._every, self._find_every = every, find_every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="writer-memory", daemon=True)
        self.peak_mb = 0.0
        self.idle_mb = 0.0  # the most seen before the first write began: the writers' own cost
        self._wrote = False
        self._writers: list[psutil.Process] = []
        self.most = 0  # writer processes seen at once
        self._found = -1e9

    def __enter__(self) -> WriterMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            if time.monotonic() - self._found >= self._find_every:
                self._found, self._writers = time.monotonic(), _writer_processes()
                self.most = max(self.most, len(self._writers))
            total, writing = _writers_rss_mb(self._writers)
            self._wrote = self._wrote or writing
            if not self._wrote:
                self.idle_mb = max(self.idle_mb, total)
            self.peak_mb = max(self.peak_mb, total)


def _writer_processes() -> list[psutil.Process]:
    """Our writer processes: only this process's descendants count (the local Ray it started);
    other Rays may run here too."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if (proc.cmdline() or [""])[0].startswith(WRITER_TITLE):
                found.append(proc)
        except psutil.Error:
            continue  # ended while we looked
    return found


def _writers_rss_mb(writers: list[psutil.Process]) -> tuple[float, bool]:
    """Summed RSS of these writer processes, and whether one of them is writing now."""
    total, writing = 0, False
    for proc in writers:
        try:
            total += proc.memory_info().rss
            writing = writing or (proc.cmdline() or [""])[0].startswith(f"{WRITER_TITLE}.write")
        except psutil.Error:
            continue  # ended while we looked
    return total / MIB, writing


def ray_environment() -> None:
    """A local Ray of our own: no usage stats, no auth, never an address from the environment; and
    raybatch byte-compiled, as an install leaves it (where PYTHONDONTWRITEBYTECODE is set, as in many
    containers, a checkout's modules would be compiled again in every new worker process, and that
    start-up cost, which an installed package does not have, would be measured too)."""
    compileall.compile_dir(Path(raybatch.__file__).parent, quiet=1)
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ.pop("RAY_ADDRESS", None)
