"""The pipeline, in the order of work:

    register    one job per source file, deduplicated by sha256          (raybatch.register)
    prepare     Ray tasks: render, text layer / OCR, chunks of 8 → requests (actors.prepare, scheduler)
    coordinate  the BatchCoordinator actor: batches or sync calls → answers  (actors.coordinator)
    write       the ResultWriter pool: documents, thumbnails, rows, groups   (actors.writer, dispatch)

``run`` wires them for one source and returns when every job of the run has ended.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import ray
from pydantic import SecretStr

from raybatch.actors.dispatch import WriterPool
from raybatch.actors.driver import Driver, DriverParts, Progress
from raybatch.actors.scheduler import PrepareScheduler
from raybatch.actors.writer import WriteReport
from raybatch.models import JobRecord, JobStatus
from raybatch.prepared import kept_requests
from raybatch.register import Registrar
from raybatch.reuse import reopen_changed, settings_config
from raybatch.runtime import connect, get_coordinator, start_writers
from raybatch.settings import Settings, StateSettings, StoreSettings
from raybatch.sources import SourceListing, list_sources
from raybatch.spend import start_run
from raybatch.state import StateStore, open_state
from raybatch.steps.pack import megabytes
from raybatch.tasks import RayPrepareTasks
from raybatch.workload import Sizing, open_budget

log = logging.getLogger(__name__)

Notice = Callable[[str], None]


@dataclass(frozen=True)
class RunReport:
    """How a run ended: its jobs, the files passed over, the writers' reports."""

    jobs: list[JobRecord]
    skipped: list[str]
    writes: list[WriteReport]
    elapsed: float
    emulator_url: str | None = None
    workload: tuple[Sizing, ...] = ()  # the concurrency the run chose from the workload budget

    @property
    def failed(self) -> list[JobRecord]:
        return [j for j in self.jobs if j.status is JobStatus.FAILED]

    @property
    def ok(self) -> bool:
        return not self.failed


def run(
    settings: Settings,
    source: str | Sequence[str],
    *,
    force: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
    notice: Notice = log.info,
    dashboard: bool = True,
) -> RunReport:
    """Process every PDF or image under ``source`` (a folder, an s3:// prefix or a list of paths).

    Raises ConfigError before any work when there is neither an API key nor the emulator asked for.
    """
    settings.require_claude()
    started = time.monotonic()
    holder = f"run-{uuid.uuid4().hex[:8]}"
    with open_budget(settings, holder, prepare_ceiling=_prepare_cap(settings)) as budget:
        state, listing, jobs = register_source(
            settings, source, force=force, notice=notice, threads=budget.register_cap()
        )
        budget.finish_registration()
        start_run(state, settings.max_cost_usd, settings.max_daily_cost_usd)
        owns_ray = connect(settings, dashboard=dashboard)
        try:
            with claude_endpoint(settings, notice) as (settings, emulator_url):
                ended, writes = _drive(settings, [j.id for j in jobs], on_progress, budget.prepare_cap)
        finally:
            if owns_ray:
                ray.shutdown()
    elapsed = time.monotonic() - started
    return RunReport(ended, listing.skipped, writes, elapsed, emulator_url, tuple(budget.sizings))


def register_source(
    settings: Settings,
    source: str | Sequence[str],
    *,
    force: bool,
    notice: Notice,
    threads: int = 4,
) -> tuple[StateStore, SourceListing, list[JobRecord]]:
    """Register every file of ``source`` as a job; finished jobs whose requests changed go again."""
    state = open_state(settings.section(StateSettings))
    listing = list_sources(source, settings.section(StoreSettings))
    for name in listing.skipped:
        notice(f"skipped {name!r}: not a PDF or image")
    registrar = Registrar(
        state,
        settings.section(StoreSettings),
        max_page_pixels=settings.max_page_pixels,
        mode=settings.processing_mode.value,
        force=force,
    )
    jobs = [r.job for r in registrar.register_all(listing.files, threads=threads)]
    notice(f"{len(jobs)} jobs registered from {len(listing.files)} files")
    _reopen_changed(state, jobs, settings, notice)
    return state, listing, state.get_jobs([j.id for j in jobs])


def _reopen_changed(state: StateStore, jobs: Sequence[JobRecord], settings: Settings, notice: Notice) -> None:
    """Finished jobs whose requests would now differ (model, prompt, modality, OCR, images, the
    emulator) are done again; the others stay finished."""
    config = settings_config(settings)
    reopened = reopen_changed(state, jobs, lambda job, n: config.key(job.sha256, n))
    if reopened:
        notice(f"{len(reopened)} finished jobs go again: their requests changed since they were answered")


def _drive(
    settings: Settings,
    job_ids: Sequence[int],
    on_progress: Callable[[Progress], None] | None,
    prepare_cap: Callable[[], int],
) -> tuple[list[JobRecord], list[WriteReport]]:
    """Build the Ray parts and tick until every job ended."""
    state = open_state(settings.section(StateSettings))
    run_id = uuid.uuid4().hex[:8]
    worker_id = f"driver-{run_id}"
    scheduler = PrepareScheduler(
        state,
        RayPrepareTasks(settings, cache=state, kept=kept_requests(settings, state)),
        worker_id=worker_id,
        max_in_flight=prepare_cap,
        max_backlog_bytes=2 * megabytes(settings.batch_max_mb),
        lease_seconds=settings.lease_seconds,
        max_attempts=settings.prepare_max_attempts,
    )
    handles = start_writers(settings, run_id)
    writers = WriterPool(
        handles,
        state,
        budget_mb=settings.max_concurrent_mb,
        worker_id=worker_id,
        lease_seconds=settings.lease_seconds,
        max_attempts=settings.max_attempts,
    )
    parts = DriverParts(
        scheduler, writers, coordinator=lambda: get_coordinator(settings), call=ray.get, ready=_ready
    )
    try:
        jobs = Driver(state, job_ids, parts, lease_seconds=settings.lease_seconds).run(on_progress)
    finally:
        for handle in handles:
            ray.kill(handle)
    return jobs, writers.reports


def _ready(ref: object) -> bool:
    done, _ = ray.wait([ref], timeout=0)
    return bool(done)


def _prepare_cap(settings: Settings) -> int | Callable[[], int]:
    """PREPARE_IN_FLIGHT, or twice the cluster's CPUs as it is now (at least 8, so that an
    autoscaled cluster starting with no worker sees demand and grows): the ceiling the workload
    budget scales."""
    if settings.prepare_in_flight:
        return settings.prepare_in_flight
    return lambda: max(8, 2 * int(ray.cluster_resources().get("CPU", 0)))


@contextlib.contextmanager
def claude_endpoint(settings: Settings, notice: Notice) -> Iterator[tuple[Settings, str | None]]:
    """The settings to reach Claude: as given, or pointing at an emulator when it was asked for (the
    one at ANTHROPIC_BASE_URL, else a built-in one started here)."""
    if not settings.uses_emulator:
        yield settings, None
        return
    if settings.anthropic_base_url:  # an emulator served apart (``raybatch emulator``)
        url = settings.anthropic_base_url
        notice(f"emulator: answers come from the emulator at {url} (marked as emulated)")
        key = settings.anthropic_api_key or SecretStr("emulator")
        yield settings.model_copy(update={"anthropic_api_key": key}), settings.anthropic_base_url
        return
    from raybatch.claude.emulator import EmulatorConfig, EmulatorServer

    host = "127.0.0.1" if _local_only() else ray.util.get_node_ip_address()
    with EmulatorServer(EmulatorConfig(processing_seconds=2.0), host=host) as server:
        notice(
            f"emulator: using the built-in Claude emulator at {server.base_url} "
            "(it answers by simple rules from the page text; its answers are marked as emulated)"
        )
        update = {"anthropic_base_url": server.base_url, "anthropic_api_key": SecretStr("emulator")}
        yield settings.model_copy(update=update), server.base_url


def _local_only() -> bool:
    """True when every Ray node is this machine, so loopback reaches the emulator."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    return len({n.get("NodeManagerAddress") for n in nodes}) <= 1
