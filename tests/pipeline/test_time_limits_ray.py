"""Time limits on a local Ray: a prepare task and a writer call that never end are stopped for real
(the task canceled, the writer actor restarted), and the work goes again."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
from driver_support import pending_job
from waiting import wait_for

from raybatch.loops.scheduler import PrepareScheduler
from raybatch.loops.writer_pool import WriterPool
from raybatch.models import JobRecord, JobStatus, Lease
from raybatch.state import SqlStateStore
from raybatch.steps.chunk import ChunkPlan
from raybatch.work.writer import WriteReport

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _hang() -> None:
    time.sleep(3600)


class SleepyTasks:
    """Prepare tasks that sleep for an hour: a render that hangs."""

    def __init__(self) -> None:
        import ray

        self._task = ray.remote(num_cpus=0.1, num_returns=2)(lambda: (_hang(), None))
        self.refs: list[Any] = []

    def load(self, job: JobRecord) -> Any:
        return None

    def stored(self, job: JobRecord, plan: ChunkPlan) -> None:
        return None

    def processing_key(self, job: JobRecord, n: int) -> str:
        return "key"

    def prepare(self, job: JobRecord, plan: ChunkPlan, source: Any) -> tuple[Any, Any]:
        summary, payload = self._task.remote()
        self.refs.append(summary)
        return summary, payload


class SleepyWriter:
    """A writer whose first call hangs; after Ray restarts it, calls return at once."""

    def __init__(self, flag: str) -> None:
        self._flag = Path(flag)

    def write_group(self, leases: list[Lease]) -> list[WriteReport]:
        if not self._flag.exists():
            self._flag.touch()
            _hang()
        return [WriteReport(lease.job_id, JobStatus.COMPLETED, 0, 0, 0, 1, 0) for lease in leases]


def _job(state: SqlStateStore, n: int, status: JobStatus) -> int:
    job_id = pending_job(state, n, pages=8)
    state.transition(job_id, [JobStatus.PENDING], status)
    return job_id


def test_a_hung_prepare_task_and_a_hung_write_are_stopped(
    ray_session: None, state: SqlStateStore, tmp_path: Path
) -> None:
    import ray
    from ray import cloudpickle
    from ray.exceptions import TaskCancelledError, WorkerCrashedError

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests

    tasks = SleepyTasks()
    sched = PrepareScheduler(
        state,
        tasks,
        worker_id="t",
        max_in_flight=4,
        max_backlog_bytes=10**9,
        lease_seconds=60,
        max_attempts=3,
        timeout=1.0,
    )
    job = _job(state, 1, JobStatus.PENDING)
    sched.claim([job])
    sched.tick(0)
    wait_for(lambda: (sched.tick(0), not sched.holds(job))[1])
    assert state.get_job(job).status is JobStatus.PENDING
    with pytest.raises((TaskCancelledError, WorkerCrashedError)):
        ray.get(tasks.refs[0], timeout=60)

    actor = ray.remote(SleepyWriter).options(max_restarts=-1, max_task_retries=0, num_cpus=0)
    writer = actor.remote(str(tmp_path / "hung-once"))
    pool = WriterPool(
        [writer], state, budget_mb=100, worker_id="t", lease_seconds=60, max_attempts=3, timeout=10.0
    )
    written = _job(state, 2, JobStatus.ANSWERED)
    pool.admit(state.list_jobs([JobStatus.ANSWERED]))
    wait_for(lambda: (reports := pool.collect()) and reports[0].status is JobStatus.ANSWERED)
    assert state.get_job(written).status is JobStatus.ANSWERED
    ended: list[WriteReport] = []

    def written_again() -> bool:  # by the restarted actor, once it is up
        pool.admit(state.list_jobs([JobStatus.ANSWERED]))
        ended.extend(pool.collect())
        return bool(ended)

    wait_for(written_again)
    assert ended[0].status is JobStatus.COMPLETED
    assert state.get_job(written).attempts == 2, "the restart cost the job no extra try"
    ray.kill(writer)
