"""Runs side by side on one database under spend caps: an urgent submit or a second run, with or
without caps, neither removes a running backlog's cap nor resets its spend, and a run's cap holds
back that run's jobs only."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from builders import PreparedJob, bundle_texts, offer, prepared_job
from fault_support import coordinator

from raybatch.claude.emulator import EmulatorServer
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.cost import prices_for
from raybatch.models import JobStatus
from raybatch.settings import DEFAULT_MODEL
from raybatch.spend import committed, end_run, expected_cost, parked_reason, read_caps, start_run
from raybatch.state import SqlStateStore
from raybatch.state.port import NewJob

PRICES = prices_for(DEFAULT_MODEL)


def job_of(state: SqlStateStore, bundle: int, run: str | None) -> PreparedJob:
    """A prepared job, registered (again) by ``run`` as a run does: a capped run governs it."""
    job = prepared_job(state, bundle_texts(bundle), name=f"b{bundle}")
    record = state.get_job(job.job_id)
    again = NewJob(record.sha256, record.source_uri, record.source_name, record.kind, record.size_bytes)
    state.register_jobs([replace(again, spend_run=run)])
    return job


def cost(job: PreparedJob) -> float:
    return sum(expected_cost(c.request, "batch", PRICES) for c in job.chunks.values())


async def steps(coord: BatchCoordinator, passes: int) -> None:
    for _ in range(passes):
        await coord.step()
        await asyncio.sleep(0.02)


@pytest.mark.anyio
async def test_a_second_run_without_caps_keeps_the_backlogs_cap_and_spend(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    backlog = [job_of(state, b, "run-a") for b in (0, 1, 2)]
    start_run(state, "run-a", cost(backlog[0]) * 1.2, 5.0)  # room for its first job only, a day cap
    coord = coordinator(emulator, state)
    await offer(coord, backlog[0])
    await coord.flush()
    await steps(coord, 5)
    started = read_caps(state).runs["run-a"].started
    spent = committed(state, started, PRICES, "run-a")
    assert spent > 0

    start_run(state, "run-b", None, None)  # an urgent submit beside it, no caps of its own
    start_run(state, "run-c", 1000.0, None)  # and a second run with a cap of its own
    urgent = job_of(state, 3, None)
    for job in [*backlog[1:], urgent]:
        await offer(coord, job)
    await coord.flush()
    await steps(coord, 15)
    await coord.stop()

    caps = read_caps(state)
    assert caps.day_usd == 5.0, "the daily cap was cleared by a run that gave none"
    assert caps.runs["run-a"].started == started, "the backlog's spend was reset"
    assert committed(state, started, PRICES, "run-a") == spent
    assert [state.get_job(j.job_id).status for j in backlog] == [
        JobStatus.ANSWERED,
        JobStatus.PREPARED,
        JobStatus.PREPARED,
    ], "the backlog went past its cap"
    assert state.get_job(urgent.job_id).status is JobStatus.ANSWERED, "another run's job waited for it"
    assert "$" in (parked_reason(state) or "") and "a run" in (parked_reason(state) or "")
    end_run(state, "run-a")
    assert set(read_caps(state).going) == {"run-c"}
