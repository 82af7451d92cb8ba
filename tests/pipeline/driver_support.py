"""Stand-ins for the Ray parts a Driver drives: prepare tasks, writers and a coordinator, no Ray.

A "ref" is a thunk: the driver's ``call`` runs it. Tests decide when a ref is ready and when a
coordinator handle is dead (its calls raise Ray's actor errors, as a killed actor's do).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ray.exceptions import ActorDiedError

from raybatch.coordinator.snapshot import CoordinatorSnapshot
from raybatch.ids import custom_id, sha256_bytes
from raybatch.loops.driver import DriverParts
from raybatch.loops.scheduler import PrepareScheduler
from raybatch.loops.writer_pool import WriterPool
from raybatch.models import ChunkRecord, ChunkStatus, JobRecord, JobStatus, Lease, SourceKind
from raybatch.state import SqlStateStore
from raybatch.steps.chunk import ChunkPlan
from raybatch.work.prepared_chunk import ChunkSummary
from raybatch.work.writer import WriteReport


@dataclass(eq=False)
class Ref:
    """A stand-in object ref: ``run`` gives its value (or raises), ``done`` says whether it is ready."""

    run: Callable[[], Any]
    done: bool = True


def pending_job(
    state: SqlStateStore,
    n: int,
    pages: int = 1,
    size_bytes: int = 1000,
    *,
    status: JobStatus = JobStatus.PENDING,
    force: bool = False,
) -> int:
    """Job ``n``, a PDF known by its number (the same ``n`` is the same file), moved to ``status``."""
    job, _ = state.register_job(
        sha256=sha256_bytes(f"job {n}".encode()),
        source_uri=f"file:///{n}.pdf",
        source_name=f"{n}.pdf",
        kind=SourceKind.PDF,
        size_bytes=size_bytes,
        force=force,
    )
    state.transition(job.id, [JobStatus.PENDING], status, pages=pages)
    return job.id


class StandInTasks:
    """Prepare tasks that finish at once (or when the test says, with ``hold``)."""

    def __init__(self, *, hold: bool = False) -> None:
        self.launched: list[tuple[int, int]] = []
        self.hold = hold
        self.refs: list[Ref] = []

    def load(self, job: JobRecord) -> Any:
        return Ref(lambda: b"")

    def processing_key(self, job: JobRecord, n: int) -> str:
        return "key"

    def stored(self, job: JobRecord, plan: ChunkPlan) -> tuple[Any, Any] | None:
        return None

    def prepare(self, job: JobRecord, plan: ChunkPlan, source: Any) -> tuple[Any, Any]:
        self.launched.append((job.id, plan.n))
        record = ChunkRecord(
            job.id, plan.n, plan.first, plan.last, custom_id(job.id, plan.n), "key", ChunkStatus.PREPARED, 100
        )
        summary = Ref(lambda: ChunkSummary(record, 0, 0), done=not self.hold)
        self.refs.append(summary)
        return summary, Ref(lambda: ("payload", job.id, plan.n))


class StandInWriter:
    """A writer actor handle: ``write_group.remote`` returns a ref that completes the jobs when run."""

    def __init__(self, state: SqlStateStore, log: list[tuple[str, int]], *, hold: bool = False) -> None:
        self.write_group = self
        self._state, self._log, self.hold = state, log, hold
        self.refs: list[Ref] = []

    def remote(self, leases: list[Lease]) -> Ref:
        self._log += [("start", lease.job_id) for lease in leases]

        def finish() -> list[WriteReport]:
            reports = []
            for lease in leases:
                self._log.append(("end", lease.job_id))
                self._state.transition(lease.job_id, [JobStatus.WRITING], JobStatus.COMPLETED)
                reports.append(WriteReport(lease.job_id, JobStatus.COMPLETED, 0, 0, 0, 1, 0))
            return reports

        ref = Ref(finish, done=not self.hold)
        self.refs.append(ref)
        return ref


class _Method:
    def __init__(self, handle: StandInCoordinator, name: str) -> None:
        self._handle, self._name = handle, name

    def remote(self, *args: Any) -> Ref:
        handle = self._handle

        def run() -> Any:
            if handle.dead:
                raise handle.death()
            return getattr(handle.actor, self._name)(*args)

        return Ref(run)


class StandInCoordinator:
    """A coordinator handle; a dead one fails every call with ``death()``."""

    def __init__(self, actor: CoordinatorState, *, dead: bool = False, death: type = ActorDiedError) -> None:
        self.actor, self.dead, self.death = actor, dead, death

    def __getattr__(self, name: str) -> _Method:
        return _Method(self, name)


@dataclass
class CoordinatorState:
    """What a live coordinator does, in short: an offered job is answered at once."""

    state: SqlStateStore
    offers: dict[int, Any] = field(default_factory=dict)
    answer: bool = True
    offered: list[int] = field(default_factory=list)  # every offer taken, in order

    def offer(self, job_id: int, chunks: dict[int, Any], mode: str, request_bytes: int) -> None:
        self.offers[job_id] = chunks
        self.offered.append(job_id)
        if self.answer:
            self.state.transition(job_id, [JobStatus.PREPARED], JobStatus.ANSWERED)

    def offer_all(self, offers: list[tuple[int, dict[int, Any], str, int]]) -> None:
        for offer in offers:
            self.offer(*offer)

    def forget(self, job_ids: list[int]) -> None:
        for job_id in job_ids:
            self.offers.pop(job_id, None)

    def flush(self, flush: bool = True) -> None:
        return None

    def snapshot(self, settled: int = -1, wait: float = 0.0) -> CoordinatorSnapshot:
        return CoordinatorSnapshot(len(self.offers), 0, 0, 0, False, False, True)


def run_ref(ref: Any) -> Any:
    return ref.run()


def wait_refs(
    refs: list[Any], num_returns: int = 1, timeout: float | None = None
) -> tuple[list[Any], list[Any]]:
    return [r for r in refs if r.done], [r for r in refs if not r.done]


def driver_parts(
    state: SqlStateStore,
    tasks: StandInTasks,
    writers: list[StandInWriter],
    coordinator: Callable[[], Any],
    *,
    budget_mb: float = 1000.0,
    worker_id: str = "driver-test",
) -> DriverParts:
    scheduler = PrepareScheduler(
        state,
        tasks,
        worker_id=worker_id,
        max_in_flight=8,
        max_backlog_bytes=10**9,
        lease_seconds=60,
        max_attempts=3,
        wait=wait_refs,
        get=run_ref,
    )
    pool = WriterPool(
        writers,
        state,
        budget_mb=budget_mb,
        worker_id=worker_id,
        lease_seconds=60,
        max_attempts=3,
        wait=wait_refs,
        get=run_ref,
    )
    return DriverParts(scheduler, pool, coordinator=coordinator, call=run_ref, ready=lambda ref: ref.done)
