"""The coordinator's backlog: what preparation must not outrun is what still waits for a batch."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import bundle_texts, offer, prepared_job

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.models import JobStatus
from raybatch.settings import ClaudeSettings, StateSettings
from raybatch.state import open_state


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
