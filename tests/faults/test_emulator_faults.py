"""A run through every fault knob of an emulator served as its own process."""

from __future__ import annotations

import pytest
from builders import bundle_texts, offer, prepared_job, run_until
from emulator_process import emulator_process, paid_answers
from fault_support import assert_ledger, coordinator
from pipeline_support import chunk_answers

from raybatch.state import SqlStateStore

FAULTS = {
    "seed": 3,
    "overloaded_times": 1,
    "server_error_times": 1,
    "rate_limit_times": 1,
    "retry_after": 0.2,
    "drop_create_responses": 1,
    "not_found_after_create": 2,
    "cut_results_after": 2,
    "cut_results_times": 1,
    "errored_fraction": 0.15,
    "expired_fraction": 0.1,
    "canceled_fraction": 0.1,
    "duplicate_fraction": 0.3,
}


@pytest.mark.slow
@pytest.mark.anyio
async def test_every_fault_knob_at_once_ends_with_every_job_answered_and_nothing_paid_twice(
    state: SqlStateStore,
) -> None:
    batch = prepared_job(state, bundle_texts(0), name="batch")
    urgent = prepared_job(state, bundle_texts(1), name="urgent", mode="sync")

    with emulator_process(FAULTS) as url:
        coord = coordinator(url, state, outage_budget=30, max_attempts=8)
        await offer(coord, batch)
        await offer(coord, urgent, mode="sync")
        await coord.flush()
        await run_until(coord, state, [batch.job_id, urgent.job_id], passes=1500)
        await coord.stop()
        answers = paid_answers(url)

    assert_ledger(state, answers, answered=[batch.job_id, urgent.job_id])
    every = {c.custom_id for job in (batch, urgent) for c in state.get_chunks(job.job_id)}
    assert set(chunk_answers(answers)) == every
    retried = [c for c in state.get_chunks(batch.job_id) if c.attempts > 0]
    assert retried, "the seeded faults sent some requests again"
