"""Register: one job per source file, deduplicated by sha256; bad files fail their own job at once.

Reading a file to hash it is also the cheapest moment to open it: its kind and page count are
recorded, and an encrypted, corrupt or empty file ends as a failed job with the reason. In a run,
files are read in Ray tasks (``SourceIntake``), near the data and never in the driver process, several
small files to a task: a file that crashes its reader fails its own job (the others of its task are
read again, each alone). Jobs are registered in the order the files were
listed, so ids follow it, and each one can be prepared as soon as it is registered.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from raybatch.errors import (
    InvalidSource,
    SourceProblem,
    TimeLimitExceeded,
    error_class,
)
from raybatch.inspection import Inspection, inspect_source, unread
from raybatch.models import JobRecord, JobStatus, Priority, ProcessingMode, mode_for
from raybatch.settings import StoreSettings
from raybatch.sources import SourceFile
from raybatch.state.port import JobStates, NewJob
from raybatch.units import MIB

log = logging.getLogger(__name__)
GROUP_FILES = 32  # files one registration task reads: a task and a result for several small files
GROUP_BYTES = 16 * MIB  # ... while they are small together (a large file goes alone)


@dataclass(frozen=True)
class Registration:
    """The job a file became, and whether this call made it."""

    source: SourceFile
    job: JobRecord
    created: bool


@dataclass(frozen=True)
class Registrar:
    """Registers source files as jobs."""

    state: JobStates
    sources: StoreSettings
    max_page_pixels: int
    mode: ProcessingMode = ProcessingMode.BATCH
    force: bool = False
    priority: Priority = Priority.NORMAL
    spend_run: str | None = None  # a capped run: the jobs it registers fall under its cap
    max_pages: int | None = None  # MAX_PAGES_PER_FILE: a file with more fails its job here

    def register_all(
        self,
        files: Sequence[SourceFile],
        *,
        threads: int = 4,
        on_done: Callable[[Registration], None] | None = None,
    ) -> list[Registration]:
        """Register every file, in the order given."""
        done: list[Registration] = []
        for inspection in self._inspected(files, threads):
            registration = self.register(inspection)
            done.append(registration)
            if on_done is not None:
                on_done(registration)
        return done

    def _inspected(self, files: Sequence[SourceFile], threads: int) -> Iterator[Inspection]:
        """Inspections in file order, a bounded number read ahead."""
        window = max(1, threads) * 2
        with ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="register") as pool:
            pending = []
            for source in files:
                pending.append(pool.submit(inspect_source, source, self.sources, self.max_page_pixels))
                if len(pending) >= window:
                    yield pending.pop(0).result()
            for future in pending:
                yield future.result()

    def register(self, inspection: Inspection) -> Registration:
        """Make (or find) the job of one inspected file and record what the inspection found."""
        return self.register_many([inspection])[0]

    def register_many(self, inspections: Sequence[Inspection]) -> list[Registration]:
        """``register`` for each, the jobs made or found in one transaction."""
        mode, run = mode_for(self.priority, self.mode), self.spend_run
        new = [
            NewJob(i.sha256, i.source.uri, i.source.name, i.kind, i.size, mode, i.pages, self.priority, run)
            for i in inspections
        ]
        found = self.state.register_jobs(new, force=self.force)
        return [self._recorded(i, job, created) for i, (job, created) in zip(inspections, found, strict=True)]

    def _recorded(self, inspection: Inspection, job: JobRecord, created: bool) -> Registration:
        """What the inspection found, on a job that is still pending (a new one holds it already)."""
        source = inspection.source
        problem = inspection.problem or self._too_long(inspection)
        if job.status is not JobStatus.PENDING or (created and problem is None):
            return Registration(source, job, created)
        if problem is not None:
            self.state.fail_job(job.id, "register", error_class(problem), str(problem))
            log.warning("job %d (%s) failed: %s", job.id, source.name, problem)
        else:
            self.state.transition(
                job.id,
                [JobStatus.PENDING],
                JobStatus.PENDING,
                pages=inspection.pages,
                mode=mode_for(job.priority, self.mode),
            )
        return Registration(source, self.state.get_job(job.id), created)

    def _too_long(self, inspection: Inspection) -> InvalidSource | None:
        """A file over MAX_PAGES_PER_FILE: it would cost one request per 8 pages."""
        pages = inspection.pages or 0
        if self.max_pages is None or pages <= self.max_pages:
            return None
        detail = f"{pages} pages, over MAX_PAGES_PER_FILE ({self.max_pages}); raise it to process this file"
        return InvalidSource(detail, reason=SourceProblem.OVERSIZED)


def crashed(source: SourceFile, reason: str) -> Inspection:
    """The inspection of a file whose reader died (a crash of the PDF library, a killed worker)."""
    return unread(source, InvalidSource(f"reading the file crashed its worker: {reason}"))


class Inspector(Protocol):
    """Starts the inspection of files somewhere else (a Ray task); returns a handle to it."""

    def inspect(self, sources: Sequence[SourceFile]) -> Any:
        """A handle that resolves to the files' Inspections, in order."""
        ...


class SourceIntake:
    """Registration as a stream: a bounded number of registration tasks at once (each reads up to
    GROUP_FILES small files), registered in listing order as their inspections come back, handed to
    the driver as they are registered."""

    def __init__(
        self,
        files: Iterator[SourceFile],
        inspector: Inspector,
        registrar: Registrar,
        *,
        in_flight: int | Callable[[], int],
        ready: Callable[[Any], bool],
        get: Callable[[Any], Sequence[Inspection]],
        failure: Callable[[BaseException], str | None],
        on_listed: Callable[[], None] = lambda: None,
        review: Callable[[list[JobRecord]], list[JobRecord]] = lambda jobs: jobs,
        timeout: float | None = None,
        cancel: Callable[[Any], None] = lambda ref: None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._files = files
        self._inspector = inspector
        self._registrar = registrar
        self._in_flight = in_flight if callable(in_flight) else lambda: in_flight
        self._ready, self._get, self._failure = ready, get, failure
        self._on_listed: Callable[[], None] | None = on_listed
        self._review = review  # the registered jobs as the driver gets them (some go again)
        self._timeout = timeout  # REGISTER_TIMEOUT: seconds a task may read, from its start
        self._cancel, self._monotonic = cancel, monotonic
        self._pending: deque[tuple[list[SourceFile], Any, float]] = deque()  # group, task, started
        self._next: SourceFile | None = None  # listed, not yet in a group
        self._listed = False
        self.files = 0
        self.jobs = 0
        self._fill()  # the first files are read while the rest of the run starts

    @property
    def refs(self) -> list[Any]:
        """The inspection registered next: files are registered in order, so waking for a later
        one would only spin."""
        return [self._pending[0][1]] if self._pending else []

    @property
    def finished(self) -> bool:
        return self._listed and not self._pending

    def take(self) -> list[JobRecord]:
        """The jobs of the files whose inspection came back, in listing order; more files started."""
        inspections: list[Inspection] = []
        while self._pending:
            group, ref, started = self._pending[0]
            ready = self._ready(ref)
            if not ready and (self._timeout is None or self._monotonic() - started <= self._timeout):
                break
            self._pending.popleft()
            inspections += self._inspections(group, ref) if ready else self._timed_out(group, ref)
        jobs = [r.job for r in self._registrar.register_many(inspections)] if inspections else []
        if jobs:
            jobs = self._review(jobs)
        self.jobs += len(jobs)
        self._fill()
        if self.finished and self._on_listed is not None:  # every file registered: said once
            done, self._on_listed = self._on_listed, None
            done()
        return jobs

    def _inspections(self, group: list[SourceFile], ref: Any) -> list[Inspection]:
        try:
            return list(self._get(ref))
        except Exception as exc:
            reason = self._failure(exc)
            if reason is None:
                raise
            if len(group) > 1:  # one of them crashed the task: each is read again, alone, in order
                log.info("a registration task of %d files crashed (%s); each goes alone", len(group), reason)
                self._alone(group)
                return []
            log.warning("reading %s crashed its worker: %s", group[0].name, reason)
            return [crashed(group[0], reason)]

    def _timed_out(self, group: list[SourceFile], ref: Any) -> list[Inspection]:
        """A task reading past REGISTER_TIMEOUT (a hung open): canceled; each of its files is read
        again alone, and a file alone that hangs fails its job; the intake goes on."""
        self._cancel(ref)
        limit = f"REGISTER_TIMEOUT ({self._timeout:g} s)"
        if len(group) > 1:
            log.info("a registration task of %d files ran past %s; each goes alone", len(group), limit)
            self._alone(group)
            return []
        log.warning("reading %s ran past %s; it fails", group[0].name, limit)
        return [unread(group[0], TimeLimitExceeded(f"reading the file at registration ran past {limit}"))]

    def _alone(self, group: list[SourceFile]) -> None:
        """Each file of ``group`` read again by a task of its own, first, in order."""
        now = self._monotonic()
        alone = [([source], self._inspector.inspect([source]), now) for source in group]
        self._pending.extendleft(reversed(alone))

    def _fill(self) -> None:
        if self._listed:
            return
        limit = max(1, self._in_flight())  # read each time: the budget's share can change
        while not self._listed and len(self._pending) < limit:
            group = self._group()
            if not group:
                self._listed = True
                return
            self.files += len(group)
            self._pending.append((group, self._inspector.inspect(group), self._monotonic()))

    def _group(self) -> list[SourceFile]:
        """The next files in listing order, up to GROUP_FILES and GROUP_BYTES (at least one)."""
        group: list[SourceFile] = []
        size = 0
        while len(group) < GROUP_FILES:
            source, self._next = self._next or next(self._files, None), None
            if source is None:
                break
            if group and size + source.size > GROUP_BYTES:
                self._next = source
                break
            group.append(source)
            size += source.size
        return group
