"""Every recovery window closes by itself: the coordinator's sweep, without Ray."""

from __future__ import annotations

import pytest
from builders import bundle_texts, offer, prepared_job, run_until, send_and_stop, settle
from fault_support import FlakyState, assert_ledger, coordinator

from raybatch.claude.emulator import EmulatorServer
from raybatch.coordinator.coordinator import SYNC_BATCH
from raybatch.models import JobStatus
from raybatch.state import SqlStateStore


@pytest.mark.anyio
async def test_sync_calls_cut_short_by_a_restart_are_sent_again(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    job = prepared_job(state, bundle_texts(0), name="urgent", mode="sync")
    ids = [c.request.custom_id for c in job.chunks.values()]
    state.mark_chunks_submitted(ids, SYNC_BATCH)  # the old coordinator died during its calls
    state.transition(job.job_id, [JobStatus.PREPARED], JobStatus.SUBMITTED)

    coord = coordinator(emulator, state)  # the restarted one; the driver offers again
    await offer(coord, job, mode="sync")
    await coord.flush()
    await run_until(coord, state, [job.job_id])
    await coord.stop()
    assert_ledger(state, emulator.app.answers(), answered=[job.job_id])


@pytest.mark.anyio
async def test_a_batch_ended_before_its_jobs_were_settled_gets_them_settled(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    job = prepared_job(state, bundle_texts(0), name="ended")
    flaky = FlakyState(state)
    flaky.fail["transition_jobs"] = 1  # the database goes away right after the results were filed
    flaky.when["transition_jobs"] = lambda job_ids, before, after, **_: after is JobStatus.ANSWERED

    await settle(coordinator(emulator, flaky), state, job)
    assert flaky.failed == ["transition_jobs"]
    assert [b.status for b in state.active_batches()] == []
    assert_ledger(state, emulator.app.answers(), answered=[job.job_id])
    assert emulator.app.calls["create"] == 1


@pytest.mark.anyio
async def test_a_batch_lost_before_its_jobs_were_settled_sends_them_again(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    emulator.config.processing_seconds = 30.0  # the batch is still running when it is given up
    job = prepared_job(state, bundle_texts(0), name="lost")

    await send_and_stop(coordinator(emulator, state), job)
    [batch] = state.active_batches()
    state.mark_batch_lost(batch.id)  # ... and the process died before settling the job
    assert state.get_job(job.job_id).status is JobStatus.SUBMITTED
    emulator.config.processing_seconds = 0.0
    await settle(coordinator(emulator, state), state, job)
    assert_ledger(state, emulator.app.answers(), answered=[job.job_id])
    assert emulator.app.calls["create"] == 2
