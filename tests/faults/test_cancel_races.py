"""A cancel racing the end of a job's preparation: the cancel stands, the run goes on."""

from __future__ import annotations

from clock import FakeClock
from driver_support import pending_job
from test_scheduler import FakeTasks, scheduler

from raybatch.cancel import cancel_jobs
from raybatch.errors import InvalidSource
from raybatch.models import JobStatus
from raybatch.objects import MemoryObjectStore
from raybatch.state import SqlStateStore


def test_a_cancel_racing_a_failing_or_expiring_prepare_leaves_the_run_going(state: SqlStateStore) -> None:
    """A job canceled while its prepare task fails, or runs past its limit on its last try: the
    cancel stands, and the scheduler goes on with the run's other jobs (no LeaseLost escapes)."""
    from ray.exceptions import RayTaskError

    failing, hung, good = (pending_job(state, n, pages=8) for n in (1, 2, 3))
    tasks, clock = FakeTasks(), FakeClock()
    tasks.failing[failing, 0] = RayTaskError(
        "prepare_chunk", "tb", InvalidSource("page 1 cannot be rendered")
    )
    sched = scheduler(state, tasks, 8, timeout=30.0, cancel=lambda ref: None, monotonic=clock.monotonic)
    sched._max_attempts = 1  # the hung task's try is its last: it would fail the job
    sched.claim([failing, hung, good])
    sched.tick(0)
    assert cancel_jobs(state, MemoryObjectStore(), [failing, hung]) == [failing, hung]
    tasks.done |= {ref for ref in sched._in_flight if ref[1] != hung}
    assert [r.job_id for r in sched.tick(0)] == [good], "the failure of a canceled job ends nothing else"
    clock.advance(31.0)
    assert sched.tick(0) == []  # the hung task's job, canceled, expires without failing
    assert state.get_job(failing).status is JobStatus.CANCELED
    assert state.get_job(hung).status is JobStatus.CANCELED
    assert sched.idle
