"""The spend cap without Ray: the coordinator parks what would pass it, and goes on once it is raised."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from builders import PreparedJob, bundle_texts, offer, prepared_job
from test_coordinator import coordinator

from raybatch.claude.emulator import EmulatorServer
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.cost import prices_for
from raybatch.models import JobStatus
from raybatch.report import status_summary
from raybatch.settings import DEFAULT_MODEL
from raybatch.spend import committed, expected_cost, parked_reason, raise_caps, read_caps, start_run
from raybatch.state import SqlStateStore
from raybatch.state.port import NewJob

PRICES = prices_for(DEFAULT_MODEL)
RUN = "run-1"


def governed(state: SqlStateStore, job: PreparedJob, run: str = RUN) -> PreparedJob:
    """The job registered again by the capped ``run``: that run's cap governs it."""
    record = state.get_job(job.job_id)
    again = NewJob(record.sha256, record.source_uri, record.source_name, record.kind, record.size_bytes)
    state.register_jobs([replace(again, spend_run=run)])
    return job


def _expected(job: PreparedJob) -> float:
    return sum(expected_cost(c.request, "batch", PRICES) for c in job.chunks.values())


async def _steps(coord: BatchCoordinator, passes: int) -> None:
    for _ in range(passes):
        await coord.step()
        await asyncio.sleep(0.02)


@pytest.mark.anyio
async def test_a_cap_below_the_cost_parks_and_a_higher_cap_completes(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    jobs = [governed(state, prepared_job(state, bundle_texts(b), name=f"b{b}")) for b in (0, 1, 2)]
    cap = _expected(jobs[0]) * 1.2  # room for the first job only
    start_run(state, RUN, cap, None)
    coord = coordinator(emulator, state)

    for job in jobs:
        await offer(coord, job)
    await coord.flush()
    await _steps(coord, 15)
    statuses = [state.get_job(j.job_id).status for j in jobs]
    assert statuses == [JobStatus.ANSWERED, JobStatus.PREPARED, JobStatus.PREPARED]
    reason = parked_reason(state)
    assert reason is not None and "resume --max-cost-usd" in reason
    assert status_summary(state, PRICES)["spend"]["parked"] == reason
    run_started = read_caps(state).run_started
    assert run_started is not None
    spent = committed(state, run_started, PRICES)
    assert 0 < spent <= cap

    raise_caps(state, 1000.0, None)  # ``raybatch resume --max-cost-usd 1000``

    await _steps(coord, 20)
    await coord.stop()
    assert {state.get_job(j.job_id).status for j in jobs} == {JobStatus.ANSWERED}
    assert parked_reason(state) is None
    assert emulator.app.calls["create"] == 2  # the first job's batch, then the rest together


@pytest.mark.anyio
async def test_spend_never_passes_the_cap_by_more_than_one_batch_estimate(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    jobs = [governed(state, prepared_job(state, bundle_texts(b), name=f"b{b}")) for b in (0, 1, 2, 3)]
    cap = sum(_expected(j) for j in jobs[:2]) * 1.05
    start_run(state, RUN, cap, None)
    coord = coordinator(emulator, state)

    for job in jobs:
        await offer(coord, job)
        await coord.flush()
        await _steps(coord, 5)
    await coord.stop()
    answered = [j for j in jobs if state.get_job(j.job_id).status is JobStatus.ANSWERED]
    assert 1 <= len(answered) < len(jobs)
    run_started = read_caps(state).run_started
    assert run_started is not None
    assert committed(state, run_started, PRICES) <= cap + max(_expected(j) for j in jobs)
