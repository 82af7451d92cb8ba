"""Two drivers on one source and one database, without Ray: each job is prepared once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from clock import FakeClock
from driver_support import (
    CoordinatorState,
    StandInCoordinator,
    StandInTasks,
    StandInWriter,
    driver_parts,
    pending_job,
)

from raybatch.loops.driver import Driver
from raybatch.models import JobStatus
from raybatch.settings import StateSettings
from raybatch.state import SqlStateStore, open_state


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}"


def driver(state: SqlStateStore, jobs: list[int], coordinator: CoordinatorState, tasks: StandInTasks,
           name: str, clock: FakeClock) -> Driver:  # fmt: skip
    parts = driver_parts(
        state, tasks, [StandInWriter(state, [])], lambda: StandInCoordinator(coordinator), worker_id=name
    )
    return Driver(state, jobs, parts, lease_seconds=60.0, monotonic=clock.monotonic, sleep=lambda s: None)


def test_two_drivers_on_one_source_prepare_each_job_once(url: str) -> None:
    state = open_state(StateSettings(database_url=url))
    jobs = [pending_job(state, n, pages=9) for n in range(4)]  # two chunks each
    coordinator = CoordinatorState(state, answer=False)  # prepared jobs wait for their batch
    first_tasks, second_tasks = StandInTasks(), StandInTasks()
    clock = FakeClock()
    first = driver(state, jobs, coordinator, first_tasks, "driver-first", clock)
    second = driver(state, jobs, coordinator, second_tasks, "driver-second", clock)
    for _ in range(20):  # both sweep the run's jobs many times while they wait, prepared
        clock.advance(1.0)
        first._step()
        second._step()

    launched = first_tasks.launched + second_tasks.launched
    assert sorted(launched) == sorted({(j, n) for j in jobs for n in (0, 1)})  # each chunk once
    assert {state.get_job(j).status for j in jobs} == {JobStatus.PREPARED}
    assert sorted(coordinator.offered) == sorted(jobs)  # each job offered once, by one driver


def test_a_prepared_job_whose_driver_is_gone_is_prepared_again(url: str) -> None:
    state = open_state(StateSettings(database_url=url))
    jobs = [pending_job(state, n) for n in range(2)]
    coordinator = CoordinatorState(state, answer=False)
    clock = FakeClock()
    gone_tasks = StandInTasks()
    gone = driver(state, jobs, coordinator, gone_tasks, "driver-gone", clock)
    gone._step()
    gone._step()  # prepared and offered both; then its process ends
    assert {state.get_job(j).status for j in jobs} == {JobStatus.PREPARED}

    # Later than the lease, as the database's clock sees it: the jobs are nobody's now.
    later = SqlStateStore.from_url(url, now=lambda: datetime.now(UTC) + timedelta(seconds=120))
    coordinator.answer = True
    tasks = StandInTasks()
    ended = driver(later, jobs, coordinator, tasks, "driver-next", clock).run()

    assert [j.status for j in ended] == [JobStatus.COMPLETED] * 2
    assert sorted(tasks.launched) == sorted(gone_tasks.launched)  # prepared again, once each
