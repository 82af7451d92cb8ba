"""An answer cut at max_tokens is never filed as complete: asked again with a larger max_tokens
within the chunk's tries and MAX_TOKENS_LIMIT, then its job fails with that reason. Without Ray:
the real SDK against the emulator (which stops an answer longer than max_tokens), real SQLite."""

from __future__ import annotations

import dataclasses

import pytest
from builders import CONFIG, bundle_texts, claude_settings, prepared_job, settle

from raybatch.claude.emulator import EmulatorServer
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.models import ChunkStatus, JobStatus
from raybatch.state import SqlStateStore

SMALL = dataclasses.replace(CONFIG, max_tokens=256)  # shorter than the emulator's answer for 8 pages


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["batch", "sync"])
async def test_a_cut_answer_is_asked_again_with_a_larger_budget(
    emulator: EmulatorServer, state: SqlStateStore, mode: str
) -> None:
    job = prepared_job(state, bundle_texts(0), name=f"long-{mode}", mode=mode, config=SMALL)
    coord = BatchCoordinator(claude_settings(emulator, max_attempts=5), state, autostart=False)
    await settle(coord, state, job, mode=mode)
    assert state.get_job(job.job_id).status is JobStatus.ANSWERED
    chunks = state.get_chunks(job.job_id)
    assert {c.status for c in chunks} == {ChunkStatus.SUCCEEDED}
    assert max(c.attempts for c in chunks) >= 1  # at least one was cut, and filed only when whole


@pytest.mark.anyio
async def test_an_answer_cut_past_the_limit_fails_its_job_with_that_reason(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    job = prepared_job(state, bundle_texts(0), name="too-long", config=SMALL)
    settings = claude_settings(emulator, max_tokens_limit=256, max_attempts=2)
    await settle(BatchCoordinator(settings, state, autostart=False), state, job)
    failed = state.get_job(job.job_id)
    assert failed.status is JobStatus.FAILED and failed.error_class == "MaxTokens"
    assert "stopped at max_tokens" in (failed.error_message or "")
    # The cut answers were paid for: each counts as a request with its tokens, though none was kept.
    assert state.request_totals([job.job_id]).requests > len(state.get_chunks(job.job_id))
