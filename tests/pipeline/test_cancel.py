"""Cancel means stop, without Ray: its prepare tasks are canceled, a writer fenced mid-write leaves
nothing, the database refuses a canceled job's rows, and the command cancels by id, by source or all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from clock import FakeClock
from driver_support import (
    CoordinatorState,
    StandInCoordinator,
    StandInTasks,
    StandInWriter,
    driver_parts,
    pending_job,
    run_ref,
    wait_refs,
)
from test_writer import answered_job, corpus, write_once  # noqa: F401 (corpus: a fixture)

from raybatch.cancel import cancel_jobs
from raybatch.commands import cancel_jobs as cancel_command
from raybatch.errors import LeaseLost
from raybatch.ids import OutputKeys
from raybatch.loops.driver import Driver
from raybatch.loops.scheduler import PrepareScheduler
from raybatch.models import JobStatus
from raybatch.objects import LocalObjectStore, MemoryObjectStore
from raybatch.report import status_summary
from raybatch.settings import StateSettings, load_settings, model_prices
from raybatch.state import SqlStateStore, open_state


class CancelingStore(MemoryObjectStore):
    """A store in which the job is canceled (as by another process) once a chosen key is put."""

    def __init__(self, state: SqlStateStore, job_id: int, trigger: str) -> None:
        super().__init__()
        self._state, self._job_id, self._trigger = state, job_id, trigger
        self.canceled = False
        self.late: list[str] = []  # objects put after the cancel

    def put(self, key: str, data: Any, **kwargs: Any) -> Any:
        if self.canceled:
            self.late.append(key)
        result = super().put(key, data, **kwargs)
        if key.endswith(self._trigger) and not self.canceled:
            self.canceled = True
            assert cancel_jobs(self._state, self, [self._job_id]) == [self._job_id]
        return result


@pytest.mark.parametrize("trigger", ["0.webp", "manifest.json"])
def test_a_write_canceled_midway_writes_nothing_more_and_leaves_nothing(
    state: SqlStateStore,
    corpus: tuple[Path, dict],  # noqa: F811 (the fixture)
    trigger: str,
) -> None:
    folder, truth = corpus
    job_id = answered_job(state, folder, truth["bundles"][0])
    store = CancelingStore(state, job_id, trigger)
    report = write_once(state, store, job_id)  # type: ignore[arg-type]

    assert store.canceled and report.status is JobStatus.CANCELED
    if trigger == "manifest.json":  # the last steps run one at a time: nothing starts after it
        assert store.late == []
    # Documents upload in parallel: one that passed its check just before the cancel may land
    # after it, and is removed with the rest.
    assert list(store.list(OutputKeys(state.database_id()).job_prefix(job_id))) == []
    assert list(store.list()) == []  # nor the job's slice of the documents table
    assert state.list_documents(job_id) == []
    assert state.get_job(job_id).status is JobStatus.CANCELED


def test_the_database_refuses_a_canceled_jobs_documents(
    state: SqlStateStore,
    corpus: tuple[Path, dict],  # noqa: F811
) -> None:
    folder, truth = corpus
    job_id = answered_job(state, folder, truth["bundles"][0])
    store = MemoryObjectStore()
    assert write_once(state, store, job_id).status is JobStatus.COMPLETED
    documents = state.list_documents(job_id)
    state.transition(job_id, [JobStatus.COMPLETED], JobStatus.CANCELED)
    with pytest.raises(LeaseLost):
        state.upsert_documents(job_id, documents)


def test_cancel_by_id_by_source_and_all(tmp_path: Path, corpus: tuple[Path, dict]) -> None:  # noqa: F811
    folder, truth = corpus
    settings = load_settings(raybatch_home=str(tmp_path))
    state = open_state(StateSettings(database_url=settings.database_url.get_secret_value()))
    first, second = (answered_job(state, folder, bundle) for bundle in truth["bundles"][:2])
    store = LocalObjectStore(settings.store)
    keys = OutputKeys(state.database_id())
    store.put(f"{keys.job_prefix(first)}/documents/0.pdf", b"%PDF")  # written before the cancel

    assert cancel_command(settings, [first]) == 0
    assert list(store.list(keys.job_prefix(first))) == []
    assert cancel_command(settings, [first]) == 1  # ended already
    assert cancel_command(settings, [], source=str(tmp_path / "elsewhere")) == 0  # none there
    assert state.get_job(second).status is JobStatus.ANSWERED
    assert cancel_command(settings, [], source=str(folder)) == 0
    assert state.get_job(second).status is JobStatus.CANCELED
    assert cancel_command(settings, [], every_live=True) == 0  # nothing live is left
    canceled = status_summary(state, model_prices(settings))["canceled"]
    assert canceled["jobs"] == 2 and canceled["job_ids"] == [first, second]
    assert canceled["estimated_cost_usd"] > 0  # what their answers cost before the cancel


def test_canceling_a_job_cancels_its_prepare_tasks(state: SqlStateStore) -> None:
    jobs = [pending_job(state, n, pages=9) for n in range(2)]  # two chunks each
    tasks, canceled = StandInTasks(hold=True), []
    scheduler = PrepareScheduler(
        state, tasks, worker_id="driver", max_in_flight=8, max_backlog_bytes=10**9, lease_seconds=60,
        max_attempts=3, wait=wait_refs, get=run_ref, cancel=canceled.append,
    )  # fmt: skip
    scheduler.claim(jobs)
    scheduler.tick(0)
    assert len(scheduler.refs) == 4
    assert cancel_jobs(state, MemoryObjectStore(), [jobs[0]]) == [jobs[0]]
    scheduler.renewed({lease.job_id: lease for lease in state.renew_leases(scheduler.leases, 60)})

    assert len(canceled) == 2 and not scheduler.holds(jobs[0]) and scheduler.holds(jobs[1])
    assert set(scheduler.refs) == set(tasks.refs) - set(canceled)  # the other job's go on


def test_the_driver_stops_preparing_a_job_canceled_meanwhile(state: SqlStateStore) -> None:
    jobs = [pending_job(state, n, pages=9) for n in range(2)]
    tasks, clock = StandInTasks(hold=True), FakeClock()
    coordinator = CoordinatorState(state)
    parts = driver_parts(state, tasks, [StandInWriter(state, [])], lambda: StandInCoordinator(coordinator))
    driver = Driver(state, jobs, parts, lease_seconds=600.0, monotonic=clock.monotonic, sleep=lambda s: None)
    driver._step()
    assert parts.scheduler.holds(jobs[0]) and len(parts.scheduler.refs) == 4
    cancel_jobs(state, MemoryObjectStore(), [jobs[0]])
    clock.advance(1.0)  # the next sweep, long before the lease would be renewed
    driver._step()

    assert not parts.scheduler.holds(jobs[0]) and parts.scheduler.holds(jobs[1])
    assert len(parts.scheduler.refs) == 2  # only the other job's tasks are still awaited
