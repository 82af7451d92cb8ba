"""The coordinator's backlog: what preparation must not outrun is what still waits for a batch."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest
from builders import bundle_texts, claude_settings, offer, prepared_job

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.models import JobStatus
from raybatch.settings import ClaudeSettings, StateSettings
from raybatch.state import SqlStateStore, open_state


@pytest.mark.anyio
async def test_submitted_jobs_leave_the_backlog_while_their_batch_runs(tmp_path: Path) -> None:
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
    # a batch that takes a minute: the jobs stay submitted, unanswered, for the whole test
    with EmulatorServer(EmulatorConfig(processing_seconds=60)) as emulator:
        settings = ClaudeSettings.model_validate(
            {"anthropic_base_url": emulator.base_url, "anthropic_api_key": "test-key", "poll_interval": 0.05}
        )
        jobs = [prepared_job(state, bundle_texts(b), name=f"b{b}") for b in (0, 1)]

        coord = BatchCoordinator(settings, state, autostart=False)
        for job in jobs:
            await offer(coord, job)
        before = (await coord.snapshot()).pending_bytes
        await coord.flush()
        await coord.step()
        after = await coord.snapshot()
        await coord.stop()
    assert before == sum(job.request_bytes for job in jobs) > 0
    assert {state.get_job(job.job_id).status for job in jobs} == {JobStatus.SUBMITTED}
    assert after.offered_jobs == 2  # the payloads are kept until answered (a retry may need them) ...
    assert after.pending_bytes == 0  # ... but they no longer count against preparation


@pytest.mark.anyio
@pytest.mark.parametrize("due_by", ["a full batch", "the driver's flush"])
async def test_a_batch_that_becomes_due_is_sent_without_waiting_for_the_next_pass(
    emulator: EmulatorServer, state: SqlStateStore, due_by: str
) -> None:
    jobs = [prepared_job(state, bundle_texts(b), name=f"b{b}") for b in (0, 1)]
    coord = BatchCoordinator(claude_settings(emulator, batch_size=2), state)  # its own loop runs
    coord._delays = itertools.repeat(3600.0)  # between passes with nothing to do: an hour
    await coord.snapshot()  # starts the loop; its first pass finds nothing and waits
    await asyncio.sleep(0.1)
    await offer(coord, jobs[0])
    if due_by == "a full batch":
        await offer(coord, jobs[1])  # BATCH_SIZE jobs wait: due
    else:
        await coord.flush()
    sent = {JobStatus.SUBMITTED, JobStatus.ANSWERED}
    for _ in range(200):  # a few seconds at most; the loop's next pass without a wake is an hour away
        if state.get_job(jobs[0].job_id).status in sent:
            break
        await asyncio.sleep(0.05)
    await coord.stop()
    assert state.get_job(jobs[0].job_id).status in sent
    assert emulator.app.calls["create"] == 1
