"""Coordinators without Ray sharing one database, and batches canceled at the API: the real SDK
against the emulator, the real SQLite state store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from builders import PreparedJob, bundle_texts, prepared_job

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.commands import cancel_jobs as cancel_command
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.models import BatchStatus, ChunkStatus, JobStatus
from raybatch.settings import ClaudeSettings, StateSettings, load_settings
from raybatch.state import SqlStateStore, open_state


def coordinator(emulator: EmulatorServer, state: SqlStateStore, **overrides: object) -> BatchCoordinator:
    values = {
        "anthropic_base_url": emulator.base_url,
        "anthropic_api_key": "test-key",
        "poll_interval": 0.05,
        "sweep_interval": 0.01,  # every pass sweeps: a sweep that steals work would show
        **overrides,
    }
    return BatchCoordinator(ClaudeSettings.model_validate(values), state, autostart=False)


async def offer(coord: BatchCoordinator, job: PreparedJob, mode: str = "batch") -> None:
    await coord.offer(job.job_id, job.chunks, mode, job.request_bytes)
    await coord.flush()


def ended(state: SqlStateStore, jobs: list[PreparedJob]) -> bool:
    return all(state.get_job(j.job_id).status.value in ("answered", "failed", "canceled") for j in jobs)


@pytest.mark.anyio
async def test_two_coordinators_on_one_database_send_each_chunk_once(state: SqlStateStore) -> None:
    config = EmulatorConfig(processing_seconds=0)
    config.faults.latency, config.faults.endpoints = 0.3, frozenset({"messages"})  # calls under way a while
    with EmulatorServer(config) as emulator:
        urgent = prepared_job(state, bundle_texts(0), name="urgent", mode="sync")
        bulk = prepared_job(state, bundle_texts(1), name="bulk")
        lead, other = coordinator(emulator, state), coordinator(emulator, state)
        await lead.step()  # beats first: it leads, it sweeps and polls
        await offer(other, urgent, "sync")
        await other.step()  # its synchronous calls are under way while the lead sweeps
        await offer(lead, bulk)
        for _ in range(100):
            await lead.step()
            await other.step()
            if ended(state, [urgent, bulk]):
                break
            await asyncio.sleep(0.02)
        await lead.stop()  # its lead goes with it: the other takes it at its next beat
        await asyncio.sleep(0.05)
        other._next_beat = 0.0
        await other.step()
        live = state.live_coordinators()
        await other.stop()
        assert live == [other.id]
        calls = dict(emulator.app.calls)
    jobs = state.list_jobs()
    assert {j.status for j in jobs} == {JobStatus.ANSWERED}
    chunks = {j.source_name: state.get_chunks(j.id) for j in jobs}
    assert all(c.status is ChunkStatus.SUCCEEDED and c.attempts == 0 for cs in chunks.values() for c in cs)
    assert calls["messages"] == len(chunks["urgent"])  # each synchronous request sent once
    assert calls["create"] == 1  # and the batch once


@pytest.mark.anyio
async def test_a_batch_past_poll_deadline_is_canceled_and_its_requests_fail_with_the_reason(
    state: SqlStateStore,
) -> None:
    with EmulatorServer(EmulatorConfig(processing_seconds=3600, cancel_seconds=0.1)) as emulator:
        job = prepared_job(state, bundle_texts(0), name="stuck")
        coord = coordinator(emulator, state, poll_deadline=0.3, max_attempts=2)
        await offer(coord, job)
        for _ in range(200):
            await coord.step()
            if ended(state, [job]):
                break
            await asyncio.sleep(0.05)
        await coord.stop()
        calls = dict(emulator.app.calls)
    job = state.list_jobs()[0]
    assert job.status is JobStatus.FAILED
    assert "POLL_DEADLINE" in (job.error_message or "")
    assert calls["create"] == 2 and calls["cancel"] == 2  # tried again once, within max attempts
    assert {c.error_class for c in state.get_chunks(job.id)} == {"PollDeadline"}


@pytest.mark.anyio
async def test_a_batch_is_canceled_once_no_live_job_remains_in_it(state: SqlStateStore) -> None:
    with EmulatorServer(EmulatorConfig(processing_seconds=3600, cancel_seconds=0.1)) as emulator:
        kept = prepared_job(state, bundle_texts(0), name="kept")
        dropped = prepared_job(state, bundle_texts(1), name="dropped")
        coord = coordinator(emulator, state)
        await offer(coord, kept)
        await offer(coord, dropped)
        await coord.step()  # one batch holds both jobs
        state.transition(dropped.job_id, [JobStatus.SUBMITTED], JobStatus.CANCELED)
        for _ in range(5):
            await coord.step()
        assert emulator.app.calls.get("cancel", 0) == 0  # a live job is still in it
        state.transition(kept.job_id, [JobStatus.SUBMITTED], JobStatus.CANCELED)
        for _ in range(100):
            await coord.step()
            if not state.active_batches():
                break
            await asyncio.sleep(0.05)
        await coord.stop()
        calls = dict(emulator.app.calls)
    assert calls["cancel"] == 1 and calls["create"] == 1  # canceled at the API, nothing sent again
    assert {j.status for j in state.list_jobs()} == {JobStatus.CANCELED}


@pytest.mark.anyio
async def test_a_coordinator_exits_once_idle_and_never_while_it_holds_work(state: SqlStateStore) -> None:
    exits: list[float] = []
    with EmulatorServer(EmulatorConfig(processing_seconds=0)) as emulator:
        job = prepared_job(state, bundle_texts(0), name="held")
        values = {
            "anthropic_base_url": emulator.base_url,
            "anthropic_api_key": "test-key",
            "poll_interval": 0.05,
            "coordinator_idle_seconds": 0.2,
        }
        loop = asyncio.get_running_loop()
        coord = BatchCoordinator(
            ClaudeSettings.model_validate(values), state, on_idle=lambda: exits.append(loop.time())
        )
        state.set_paused(True)  # the offer stays held
        await offer(coord, job)
        await asyncio.sleep(0.8)
        assert exits == []  # no driver calls, but it holds an offer
        assert state.live_coordinators() == [coord.id]
        await coord.forget([job.job_id])
        for _ in range(40):
            if exits:
                break
            await asyncio.sleep(0.05)
        await coord.stop()
    assert len(exits) == 1
    assert state.live_coordinators() == []  # it retired: its lead is free at once


@pytest.mark.anyio
async def test_the_cancel_command_cancels_at_once_a_batch_no_live_job_needs(tmp_path: Path) -> None:
    with EmulatorServer(EmulatorConfig(processing_seconds=3600)) as emulator:
        settings = load_settings(
            raybatch_home=str(tmp_path), anthropic_base_url=emulator.base_url, anthropic_api_key="test-key"
        )
        state = open_state(settings.section(StateSettings))
        job = prepared_job(state, bundle_texts(0), name="one")

        coord = coordinator(emulator, state)
        await offer(coord, job)
        await coord.step()
        await coord.stop()
        assert [b.status for b in state.active_batches()] == [BatchStatus.IN_PROGRESS]
        assert cancel_command(settings, [job.job_id]) == 0
        assert emulator.app.calls["cancel"] == 1
