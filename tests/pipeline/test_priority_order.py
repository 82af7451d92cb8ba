"""Urgent first everywhere, without Ray: the prepare queue, the driver's claims (jobs made urgent
and jobs another process registered), the writers, and the coordinator's synchronous path."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from builders import bundle_texts, offer, prepared_job
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

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.loops.driver import Driver
from raybatch.loops.scheduler import PrepareScheduler
from raybatch.loops.writer_pool import WriterPool
from raybatch.models import JobStatus, Priority
from raybatch.settings import ClaudeSettings
from raybatch.state import SqlStateStore


def urgent_job(state: SqlStateStore, n: int, pages: int = 1) -> int:
    """An urgent job registered by someone else (another process, the ``urgent`` command)."""
    job_id = pending_job(state, n, pages=pages)
    state.set_priority([job_id], Priority.URGENT)
    return job_id


def test_urgent_chunks_are_prepared_ahead_of_queued_normal_ones(state: SqlStateStore) -> None:
    normal = [pending_job(state, n, pages=24) for n in range(2)]  # 3 chunks each
    urgent = urgent_job(state, 9, pages=16)  # 2 chunks
    tasks = StandInTasks(hold=True)
    scheduler = PrepareScheduler(
        state, tasks, worker_id="t", max_in_flight=1, max_backlog_bytes=10**6, lease_seconds=60,
        max_attempts=3, wait=wait_refs, get=run_ref,
    )  # fmt: skip
    scheduler.claim(normal)
    scheduler.tick(0)
    scheduler.claim([urgent])
    for _ in range(4):
        for ref in tasks.refs:
            ref.done = True
        scheduler.tick(10**9)  # a full batch backlog holds normal chunks, never urgent ones
    assert tasks.launched == [(normal[0], 0), (urgent, 0), (urgent, 1)]


def test_the_driver_claims_jobs_made_urgent_first_and_leaves_other_runs_urgent_jobs(
    state: SqlStateStore,
) -> None:
    backlog = [pending_job(state, n) for n in range(8)]
    tasks = StandInTasks(hold=True)
    log: list[tuple[str, int]] = []
    live = StandInCoordinator(CoordinatorState(state))
    parts = driver_parts(state, tasks, [StandInWriter(state, log)], lambda: live)
    clock = FakeClock()
    arrived: dict[int, set[int]] = {}
    foreign: list[int] = []

    def wait(refs: list[Any], timeout: float) -> None:
        clock.advance(1.0)
        if (
            clock.monotonic() == 2.0
        ):  # while the backlog runs: one of its jobs is made urgent, another arrives
            normal = {j.id for j in state.list_jobs([JobStatus.PENDING])} - {backlog[-1]}
            foreign.append(urgent_job(state, 99))  # another run's: its own driver prepares it
            state.set_priority([backlog[-1]], Priority.URGENT)
            arrived[backlog[-1]] = normal
        for ref in tasks.refs[:1]:
            ref.done = True
        tasks.refs = [r for r in tasks.refs if not r.done]

    parts.wait = wait
    driver = Driver(state, backlog, parts, claim_window=2, sleep=lambda s: None, monotonic=clock.monotonic)
    ended = driver.run()

    assert len(ended) == 8 and {j.status for j in ended} == {JobStatus.COMPLETED}
    assert state.get_job(foreign[0]).status is JobStatus.PENDING
    assert arrived and foreign[0] not in [job for job, _ in tasks.launched]
    order = [job for job, _ in tasks.launched]
    for urgent, pending in arrived.items():
        assert pending and all(order.index(urgent) < order.index(j) for j in pending)
    written = [job for what, job in log if what == "start"]
    for urgent, pending in arrived.items():
        assert all(written.index(urgent) < written.index(j) for j in pending)


def test_writers_take_urgent_jobs_first(state: SqlStateStore) -> None:
    normal = [pending_job(state, n) for n in range(3)]
    urgent = urgent_job(state, 9)
    for job_id in [*normal, urgent]:
        state.transition(job_id, [JobStatus.PENDING], JobStatus.ANSWERED)
    log: list[tuple[str, int]] = []
    pool = WriterPool(
        [StandInWriter(state, log, hold=True)], state, budget_mb=1000, worker_id="w", lease_seconds=60,
        max_attempts=3, wait=wait_refs, get=run_ref,
    )  # fmt: skip
    candidates = state.claimable_jobs([JobStatus.ANSWERED], JobStatus.WRITING, limit=2)
    assert [j.id for j in candidates] == [urgent, normal[0]]
    assert pool.admit(list(reversed(state.list_jobs()))) == [urgent]


@pytest.mark.anyio
async def test_the_coordinator_sends_urgent_jobs_at_once_and_batches_wait_to_fill(
    state: SqlStateStore,
) -> None:
    with EmulatorServer(EmulatorConfig(processing_seconds=0)) as emulator:
        values = {"anthropic_base_url": emulator.base_url, "anthropic_api_key": "test-key"}
        claude = ClaudeSettings.model_validate({**values, "poll_interval": 60})
        coord = BatchCoordinator(claude, state, autostart=False)
        normal = [prepared_job(state, bundle_texts(b), name=f"n{b}") for b in (0, 1)]
        late = prepared_job(state, bundle_texts(2), name="late")  # offered as batch, made urgent after

        for job in [*normal, late]:
            await offer(coord, job)
        await coord.step()  # nothing is due: the batch waits to fill
        assert emulator.app.calls.get("messages", 0) == 0
        state.set_priority([late.job_id], Priority.URGENT)
        for _ in range(50):
            await coord.step()
            if state.get_job(late.job_id).status is JobStatus.ANSWERED:
                break
            await asyncio.sleep(0.02)
        await coord.stop()
        assert state.get_job(late.job_id).status is JobStatus.ANSWERED
        assert {c.sent_mode for c in state.get_chunks(late.job_id)} == {"sync"}
        assert emulator.app.calls.get("create", 0) == 0  # the normal jobs still wait for their batch
        assert {state.get_job(j.job_id).status for j in normal} == {JobStatus.PREPARED}


@pytest.mark.anyio
async def test_synchronous_work_is_sent_while_the_loop_is_busy_polling(state: SqlStateStore) -> None:
    with EmulatorServer(EmulatorConfig(processing_seconds=0)) as emulator:
        values = {"anthropic_base_url": emulator.base_url, "anthropic_api_key": "test-key"}
        coord = BatchCoordinator(ClaudeSettings.model_validate({**values, "poll_interval": 0.05}), state)
        first = prepared_job(state, bundle_texts(0), name="first", mode="sync")
        urgent = prepared_job(state, bundle_texts(1), name="urgent", mode="sync")

        release, polling = asyncio.Event(), asyncio.Event()
        polls = coord._polls.poll

        async def busy_poll() -> bool:  # a backlog's results being filed: the pass is held here
            polling.set()
            await release.wait()
            return await polls()

        coord._polls.poll = busy_poll  # type: ignore[method-assign]
        await offer(coord, first, "sync")
        await asyncio.wait_for(polling.wait(), 30)  # the loop recovered, sent it, and is polling
        await offer(coord, urgent, "sync")
        for _ in range(500):
            if state.get_job(urgent.job_id).status is JobStatus.ANSWERED:
                break
            await asyncio.sleep(0.02)
        answered = state.get_job(urgent.job_id).status is JobStatus.ANSWERED
        sent_while_busy = answered and not release.is_set()
        release.set()
        await coord.stop()
        assert sent_while_busy
