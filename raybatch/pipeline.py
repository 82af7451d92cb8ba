"""The pipeline, in the order of work:

    register    Ray tasks: one job per source file, deduplicated by sha256  (raybatch.register, shells.tasks)
    prepare     Ray tasks: render, text layer / OCR, chunks of 8 → requests (work.prepare, loops.scheduler)
    coordinate  the BatchCoordinator actor: batches or sync calls → answers  (coordinator/)
    write       the ResultWriter pool: documents, thumbnails, rows, groups   (work.writer, loops.writer_pool)

``run`` wires them for one source and returns when every job of the run has ended. The stages
overlap: a file is prepared as soon as it is registered, and written as soon as it is answered.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import secrets
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import ray
from pydantic import SecretStr
from ray.exceptions import RayError, RayTaskError

from raybatch.collector import seldom
from raybatch.compaction import compact_table
from raybatch.errors import RaybatchError
from raybatch.loops.driver import Driver, DriverParts, Progress
from raybatch.loops.scheduler import (
    GROUP_CHUNKS,
    SAVE_JOBS,
    SAVE_SECONDS,
    PrepareScheduler,
    cancel_task,
    failure_reason,
)
from raybatch.loops.writer_pool import WriterPool
from raybatch.models import JobRecord, JobStatus, Priority
from raybatch.outage import patient_state
from raybatch.prepared import kept_requests
from raybatch.register import Registrar, SourceIntake
from raybatch.reuse import reopen_changed, settings_config
from raybatch.settings import Settings, StateSettings, StoreSettings
from raybatch.shells.runtime import connect, get_coordinator, retire_coordinator
from raybatch.shells.tasks import RayInspector, RayPrepareTasks
from raybatch.shells.writers import start_writer
from raybatch.sources import SourceFile, SourceListing, iter_sources, list_sources
from raybatch.spend import end_run, start_run
from raybatch.state import StateStore, open_state
from raybatch.steps.pack import megabytes
from raybatch.stopping import StopRequest, stop_on_signals
from raybatch.terminal import ProgressBars
from raybatch.uploads import keep_out_of_uploads, local_paths
from raybatch.work.writer import WriteReport
from raybatch.workload import Budget, Sizing, open_budget

log = logging.getLogger(__name__)
COALESCE_SECONDS = 0.02  # how long a step waits for more work finishing with the first
CLAIM_WINDOW = 64  # jobs held for preparing, at least (see _claim_window)

Notice = Callable[[str], None]
OnProgress = Callable[[Progress], None]


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
    on_progress: OnProgress | None = None,
    notice: Notice = log.info,
    dashboard: bool = True,
    urgent: bool = False,
    progress: bool = False,
) -> RunReport:
    """Process every PDF or image under ``source`` (a folder, an s3:// prefix or a list of paths).

    ``urgent``: every job of the source is urgent (sent synchronously, taken first everywhere, also
    by a run already going on the same database); otherwise new jobs are normal and sent by
    PROCESSING_MODE. ``progress``: show the CLI's progress bars (in a terminal or a notebook), besides
    ``on_progress``. Raises ConfigError before any work when there is neither an API key nor the
    emulator asked for.
    """
    settings.require_claude()
    keep_out_of_uploads(local_paths(settings), notice=notice)
    started = time.monotonic()
    skipped: list[str] = []

    def skip(name: str) -> None:
        skipped.append(name)
        notice(f"skipped {name!r}: not a PDF or image")

    files = iter_sources(source, settings.section(StoreSettings), on_skip=skip)
    state = _patient_state(settings)
    holder = f"run-{uuid.uuid4().hex[:8]}"
    capped = holder if settings.max_cost_usd is not None else None
    registrar = _registrar(state, settings, force=force, urgent=urgent, spend_run=capped)
    start_run(state, holder, settings.max_cost_usd, settings.max_daily_cost_usd)
    owns_ray = connect(settings, dashboard=dashboard)
    try:
        # Set after ``ray.init`` (whose own SIGTERM handler exits): the driver drains on a signal;
        # before it takes work and once it ended, a signal interrupts, and what is held is given back.
        with (
            seldom(),
            stop_on_signals(drain=False) as stop,
            open_budget(settings, holder, prepare_ceiling=_prepare_cap(settings)) as budget,
        ):
            reopen = _reopener(state, settings, notice)
            intake = _intake(settings, files, registrar, budget, reopen)
            # A built-in emulator ends with this run: so must the coordinator that talks to it.
            own_emulator = settings.uses_emulator and not settings.anthropic_base_url
            with (
                claude_endpoint(settings, notice) as (settings, emulator_url),
                ProgressBars(progress) as bars,
            ):
                watch = _both(bars.update, on_progress)
                ended, writes = _drive(settings, intake, watch, budget.prepare_cap, stop, own_emulator)
            notice(f"{intake.jobs} jobs registered from {intake.files} files")
            compact_table(settings, state, notice)
    finally:
        with contextlib.suppress(RaybatchError):  # a database away: the cap stays, governing nothing new
            end_run(state, holder)
        if owns_ray:
            ray.shutdown()
    elapsed = time.monotonic() - started
    return RunReport(ended, skipped, writes, elapsed, emulator_url, tuple(budget.sizings))


# For a service that hands over one bundle (a file, a folder, a list of paths) while a backlog runs:
# ``run`` without a dashboard of its own; ``urgent=True`` sends the bundle ahead of every normal job.
submit = functools.partial(run, dashboard=False)


def _both(first: OnProgress, then: OnProgress | None) -> OnProgress:
    """``first``, and ``then`` when there is one."""
    if then is None:
        return first

    def both(progress: Progress) -> None:
        first(progress)
        then(progress)

    return both


def _intake(
    settings: Settings,
    files: Iterator[SourceFile],
    registrar: Registrar,
    budget: Budget,
    reopen: Callable[[list[JobRecord]], list[JobRecord]],
) -> SourceIntake:
    """Registration in Ray tasks, the first files started at once: as many at a time as the workload
    budget's registration share; its units go back once every file is registered."""
    return SourceIntake(
        files,
        RayInspector(settings, urgent=registrar.priority is Priority.URGENT),
        registrar,
        in_flight=budget.register_cap,
        ready=_ready,
        get=ray.get,
        failure=_crash_reason,
        on_listed=budget.finish_registration,
        review=reopen,
        timeout=settings.register_timeout,
        cancel=cancel_task,
    )


def _crash_reason(exc: BaseException) -> str | None:
    """Why a registration task ended without an inspection (None: not a task's failure)."""
    if isinstance(exc, RayTaskError) and exc.cause is not None:
        return failure_reason(exc.cause)
    return failure_reason(exc) if isinstance(exc, RayError) else None


def register_source(
    settings: Settings,
    source: str | Sequence[str],
    *,
    force: bool,
    notice: Notice,
    threads: int = 4,
) -> tuple[StateStore, SourceListing, list[JobRecord]]:
    """Register every file of ``source`` as a job, in this process (``estimate``); finished jobs
    whose requests changed go again."""
    state = open_state(settings.section(StateSettings))
    listing = list_sources(source, settings.section(StoreSettings))
    for name in listing.skipped:
        notice(f"skipped {name!r}: not a PDF or image")
    registrar = _registrar(state, settings, force=force)
    jobs = [r.job for r in registrar.register_all(listing.files, threads=threads)]
    notice(f"{len(jobs)} jobs registered from {len(listing.files)} files")
    return state, listing, _reopener(state, settings, notice)(jobs)


def _registrar(
    state: StateStore, settings: Settings, *, force: bool, urgent: bool = False, spend_run: str | None = None
) -> Registrar:
    """What turns a source's files into jobs, as the settings say."""
    return Registrar(
        state,
        settings.section(StoreSettings),
        max_page_pixels=settings.max_page_pixels,
        mode=settings.processing_mode,
        force=force,
        priority=Priority.URGENT if urgent else Priority.NORMAL,
        spend_run=spend_run,
        max_pages=settings.max_pages_per_file,
    )


def _reopener(
    state: StateStore, settings: Settings, notice: Notice
) -> Callable[[list[JobRecord]], list[JobRecord]]:
    """Registered jobs as they are now: finished ones whose requests would now differ (model,
    prompt, modality, OCR, images, the emulator) go again; the others stay finished."""
    config = settings_config(settings)

    def reopen(jobs: list[JobRecord]) -> list[JobRecord]:
        reopened = reopen_changed(state, jobs, lambda job, n: config.key(job.sha256, n))
        if not reopened:
            return jobs
        notice(f"{len(reopened)} finished jobs go again: their requests changed since they were answered")
        again = {job.id: job for job in state.get_jobs(reopened)}
        return [again.get(job.id, job) for job in jobs]

    return reopen


def _drive(
    settings: Settings,
    intake: SourceIntake,
    on_progress: OnProgress | None,
    prepare_cap: Callable[[], int],
    stop: StopRequest,
    retire: bool = False,
) -> tuple[list[JobRecord], list[WriteReport]]:
    """Build the Ray parts and drive until every job ended."""
    state = _patient_state(settings)
    database_id = state.database_id()  # the coordinator's identity starts with it
    run_id = uuid.uuid4().hex[:8]
    worker_id = f"driver-{run_id}"
    # The coordinator starts in the background while the first files register and prepare; the
    # first writer once answers are on their way (its start would take CPU the first chunks and the
    # coordinator's start need), the others with it for a backlog, or while answered jobs wait.
    handles: list[Any] = []
    scheduler = PrepareScheduler(
        state,
        RayPrepareTasks(settings, cache=state, kept=kept_requests(settings, state)),
        worker_id=worker_id,
        max_in_flight=prepare_cap,
        max_backlog_bytes=2 * megabytes(settings.batch_max_mb),
        lease_seconds=settings.lease_seconds,
        max_attempts=settings.prepare_max_attempts,
        timeout=settings.prepare_timeout,
        save_jobs=SAVE_JOBS,
        save_seconds=SAVE_SECONDS,
        group_chunks=GROUP_CHUNKS,
    )
    writers = WriterPool(
        [],
        state,
        budget_mb=settings.max_concurrent_mb,
        worker_id=worker_id,
        lease_seconds=settings.lease_seconds,
        max_attempts=settings.max_attempts,
        timeout=settings.write_timeout,
        placed_check=True,
    )

    def start_one() -> bool:
        if len(handles) < settings.result_workers:
            handles.append(start_writer(settings, run_id, len(handles)))  # killed when the run ends
            writers.grow(handles[-1:])
        return len(handles) < settings.result_workers

    parts = DriverParts(
        scheduler,
        writers,
        coordinator=lambda: get_coordinator(settings, database_id),
        call=ray.get,
        ready=_ready,
        wait=lambda refs, timeout: wait_any(refs, timeout, prompt=writers.refs),
        intake=intake,
        start_writer=start_one,
    )
    window = _claim_window(prepare_cap)
    try:
        driver = Driver(
            state,
            [],
            parts,
            lease_seconds=settings.lease_seconds,
            claim_window=window,
            writer_grow_seconds=settings.writer_grow_seconds,
            drain_seconds=settings.drain_seconds,
        )
        with stop.draining():
            jobs = driver.run(on_progress, stop=stop)
    finally:
        for handle in handles:
            ray.kill(handle)
        if retire:
            retire_coordinator(settings, database_id)
    if stop():  # drained: the caller says so as for an interrupt (run the same command again)
        raise KeyboardInterrupt
    return jobs, writers.reports


def _patient_state(settings: Settings) -> StateStore:
    """The state database for the driver's process: a restart of the database is waited out."""
    return patient_state(open_state(settings.section(StateSettings)), settings.database_outage_budget)


def _ready(ref: object) -> bool:
    done, _ = ray.wait([ref], timeout=0)
    return bool(done)


def wait_any(refs: list[object], timeout: float, prompt: Collection[object] = ()) -> None:
    """Until one of ``refs`` is done (or the timeout), then a moment more for others finishing with
    it: the driver's step then handles them together, in fewer statements. Not when one of
    ``prompt`` ended (a write call: its writer waits idle for the next)."""
    done, rest = ray.wait(refs, num_returns=1, timeout=timeout)
    if done and rest and not any(ref in prompt for ref in done):
        ray.wait(rest, num_returns=len(rest), timeout=COALESCE_SECONDS)


def _claim_window(prepare_cap: Callable[[], int]) -> Callable[[], int]:
    """Jobs claimed for preparing at once: enough for every prepare slot to take a full group of
    small jobs (GROUP_CHUNKS times the prepare cap, as the budget and the cluster are now), never
    the whole backlog; at least CLAIM_WINDOW, so that small jobs are claimed CLAIM_WINDOW / 2 at a
    time (a claim is a few statements whatever its size)."""
    return lambda: max(CLAIM_WINDOW, GROUP_CHUNKS * prepare_cap())


def _prepare_cap(settings: Settings) -> int | Callable[[], int]:
    """PREPARE_IN_FLIGHT, or twice the cluster's CPUs as it is now (at least 8, so that an
    autoscaled cluster starting with no worker sees demand and grows): the ceiling the workload
    budget scales."""
    if settings.prepare_in_flight:
        return settings.prepare_in_flight
    seen = {"at": -1e9, "cap": 8}

    def cap() -> int:  # asking Ray costs milliseconds: once every few seconds is enough
        if time.monotonic() - seen["at"] >= 5.0:
            seen["at"], seen["cap"] = time.monotonic(), max(8, 2 * int(ray.cluster_resources().get("CPU", 0)))
        return int(seen["cap"])

    return cap


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
    # Loopback while every node is this machine; else the node's address, where others can reach it.
    host = "127.0.0.1" if _local_only() else ray.util.get_node_ip_address()
    with builtin_emulator(settings, host) as (emulated, url):
        notice(
            f"emulator: using the built-in Claude emulator at {url} "
            "(it answers by simple rules from the page text; its answers are marked as emulated)"
        )
        if settings.emulator_doubt:
            notice(f"emulator: it doubts on purpose, for review to find: {settings.emulator_doubt}")
        yield emulated, url


@contextlib.contextmanager
def builtin_emulator(settings: Settings, host: str) -> Iterator[tuple[Settings, str]]:
    """The built-in emulator on ``host``, answering only calls that carry a key made for this run
    (on a cluster it listens where every node can reach it); the settings that reach it."""
    from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
    from raybatch.claude.emulator.doubt import doubt_faults

    key = secrets.token_urlsafe(24)
    config = EmulatorConfig(processing_seconds=2.0, api_key=key, faults=doubt_faults(settings.emulator_doubt))
    with EmulatorServer(config, host=host) as server:
        update = {"anthropic_base_url": server.base_url, "anthropic_api_key": SecretStr(key)}
        yield settings.model_copy(update=update), server.base_url


def _local_only() -> bool:
    """True when every Ray node is this machine, so loopback reaches the emulator."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    return len({n.get("NodeManagerAddress") for n in nodes}) <= 1
