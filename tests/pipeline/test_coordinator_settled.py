"""A snapshot asked to wait comes as soon as answered jobs are settled: the driver's writers take
the answers as they are filed, not at the driver's next look at the database."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from builders import bundle_texts, claude_settings, offer, prepared_job

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.models import JobStatus
from raybatch.settings import StateSettings
from raybatch.state import open_state


@pytest.mark.anyio
async def test_a_waiting_snapshot_comes_when_a_pass_settles_answers_and_not_before(tmp_path: Path) -> None:
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
    with EmulatorServer(EmulatorConfig(processing_seconds=0)) as emulator:
        coord = BatchCoordinator(claude_settings(emulator), state, autostart=False)
        job = prepared_job(state, bundle_texts(0), name="b0")
        first = await coord.snapshot()  # nothing seen yet: at once
        waiting = asyncio.ensure_future(coord.snapshot(first.settled, 60.0))
        await asyncio.sleep(0.2)
        early = waiting.done()  # nothing settled: it still waits
        await offer(coord, job)
        await coord.flush()
        for _ in range(50):  # the pass sends the batch, which ends at once, and files its answers
            await coord.step()
            if waiting.done():
                break
            await asyncio.sleep(0.05)
        taken = await asyncio.wait_for(waiting, 5.0)
        idle = await asyncio.wait_for(coord.snapshot(taken.settled, 0.05), 5.0)  # nothing more: its wait ends
        await coord.stop()
    assert first.settled == 0 and not early
    assert taken.settled > first.settled
    assert state.get_job(job.job_id).status is JobStatus.ANSWERED
    assert idle.settled == taken.settled
