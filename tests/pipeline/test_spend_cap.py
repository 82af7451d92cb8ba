"""The spend cap without Ray: the coordinator parks what would pass it, and goes on once it is raised."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from builders import PreparedJob, bundle_texts, claude_settings, offer, prepared_job
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
from raybatch.work.prepared_chunk import PreparedChunk

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


@pytest.mark.anyio
async def test_while_the_cap_holds_everything_a_pass_resolves_batch_size_jobs_not_the_backlog(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    """A pass takes every job that waits; once the cap held all of them, the next passes try
    BATCH_SIZE of them (the cap may have been raised) rather than resolving the whole backlog each
    time; a raised cap sends them all again (the try's batch first, the rest a POLL_INTERVAL later)."""
    jobs = [governed(state, prepared_job(state, bundle_texts(b % 3), name=f"b{b}")) for b in range(6)]
    start_run(state, RUN, _expected(jobs[0]) / 10, None)  # room for no job at all
    resolved: list[set[int]] = []

    async def resolve(payloads: list[PreparedChunk]) -> list[PreparedChunk]:
        resolved[-1].update(payload.request.job_id for payload in payloads)
        return payloads

    claude = claude_settings(emulator, batch_size=2)
    coord = BatchCoordinator(claude, state, autostart=False, resolve=resolve)
    for job in jobs:
        await offer(coord, job)
    for _ in range(3):
        resolved.append(set())
        await coord.step()
    raise_caps(state, 1000.0, None)
    for _ in range(3):
        resolved.append(set())
        await asyncio.sleep(claude.poll_interval)  # a batch a POLL_INTERVAL, unless a full one waits
        await coord.step()
    await coord.stop()
    assert [len(jobs_of_pass) for jobs_of_pass in resolved[:3]] == [6, 2, 2]
    assert len(resolved[3]) == 2 and len(resolved[4]) == 4  # the try goes; then the rest at once
    assert {state.get_job(j.job_id).status for j in jobs} <= {JobStatus.SUBMITTED, JobStatus.ANSWERED}
