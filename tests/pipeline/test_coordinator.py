"""BatchCoordinator without Ray: the real SDK against the emulator, the real SQLite state store."""

from __future__ import annotations

import asyncio

import pytest
from builders import bundle_texts, claude_settings, offer, prepared_job, run_until, send_and_stop, settle
from clock import FakeClock

from raybatch.claude.emulator import EmulatorServer
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.ids import marked_custom_id
from raybatch.models import BatchStatus, ChunkStatus, JobStatus
from raybatch.state import SqlStateStore


def coordinator(emulator: EmulatorServer, state: SqlStateStore, **overrides: object) -> BatchCoordinator:
    return BatchCoordinator(claude_settings(emulator, **overrides), state, autostart=False)


@pytest.mark.anyio
async def test_batch_mode_answers_every_chunk_in_one_batch(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    jobs = [prepared_job(state, bundle_texts(b), name=f"b{b}") for b in (0, 1)]
    coord = coordinator(emulator, state)
    for job in jobs:
        await offer(coord, job)
    await coord.flush()
    await run_until(coord, state, [j.job_id for j in jobs])
    await coord.stop()
    jobs = state.list_jobs()
    assert {j.status for j in jobs} == {JobStatus.ANSWERED}
    chunks = [c for j in jobs for c in state.get_chunks(j.id)]
    assert {c.status for c in chunks} == {ChunkStatus.SUCCEEDED}
    assert len({c.batch_id for c in chunks}) == 1
    assert all(c.input_tokens > 0 and c.output_tokens > 0 for c in chunks)
    assert emulator.app.calls["create"] == 1


@pytest.mark.anyio
async def test_sync_mode_skips_batching(emulator: EmulatorServer, state: SqlStateStore) -> None:
    job = prepared_job(state, bundle_texts(0), name="urgent", mode="sync")
    await settle(coordinator(emulator, state), state, job, mode="sync")
    assert state.list_jobs()[0].status is JobStatus.ANSWERED
    assert emulator.app.calls.get("create", 0) == 0
    assert emulator.app.calls["messages"] >= 1


@pytest.mark.anyio
async def test_pause_holds_submissions_and_polls(emulator: EmulatorServer, state: SqlStateStore) -> None:
    job = prepared_job(state, bundle_texts(0), name="held")
    coord = coordinator(emulator, state)
    state.set_paused(True)
    await offer(coord, job)
    await coord.flush()
    for _ in range(5):
        assert await coord.step() is False
    assert emulator.app.calls.get("create", 0) == 0
    assert state.get_job(job.job_id).status is JobStatus.PREPARED
    state.set_paused(False)
    await run_until(coord, state, [job.job_id])
    await coord.stop()
    assert state.list_jobs()[0].status is JobStatus.ANSWERED


def sent_id(state: SqlStateStore, custom_id: str) -> str:
    """The id the emulator sees for a chunk sent in a batch: marked with its database."""
    return marked_custom_id(custom_id, state.database_id())


@pytest.mark.anyio
async def test_errored_and_expired_results_go_again_in_a_later_batch(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    job = prepared_job(state, bundle_texts(0), name="flaky")
    ids = sorted(sent_id(state, c.request.custom_id) for c in job.chunks.values())
    emulator.faults.errored_ids = frozenset({ids[0]})
    emulator.faults.errored_type = "overloaded_error"
    emulator.faults.expired_ids = frozenset({ids[1]})
    coord = coordinator(emulator, state)
    await offer(coord, job)
    await coord.flush()
    await coord.step()  # the first batch: its results are planned when it is created
    emulator.faults.errored_ids = emulator.faults.expired_ids = frozenset()
    await run_until(coord, state, [job.job_id])
    await coord.stop()
    assert state.get_job(job.job_id).status is JobStatus.ANSWERED
    chunks = state.get_chunks(job.job_id)
    assert {c.status for c in chunks} == {ChunkStatus.SUCCEEDED}
    assert sorted(c.attempts for c in chunks)[-2:] == [1, 1]
    assert emulator.app.calls["create"] == 2


@pytest.mark.anyio
async def test_an_invalid_request_fails_its_job_only(emulator: EmulatorServer, state: SqlStateStore) -> None:
    bad = prepared_job(state, bundle_texts(0), name="bad")
    good = prepared_job(state, bundle_texts(1), name="good")
    emulator.faults.errored_ids = frozenset({sent_id(state, bad.chunks[0].request.custom_id)})
    emulator.faults.errored_type = "invalid_request_error"
    coord = coordinator(emulator, state)
    await offer(coord, bad)
    await offer(coord, good)
    await coord.flush()
    await run_until(coord, state, [bad.job_id, good.job_id])
    await coord.stop()
    bad_id, good_id = bad.job_id, good.job_id
    bad = state.get_job(bad_id)
    assert bad.status is JobStatus.FAILED
    assert "chunk 0" in (bad.error_message or "")
    assert state.get_job(good_id).status is JobStatus.ANSWERED


@pytest.mark.anyio
async def test_a_new_coordinator_reattaches_batches_in_flight(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    emulator.config.processing_seconds = 1.0

    job = prepared_job(state, bundle_texts(0), name="survivor")
    await send_and_stop(coordinator(emulator, state), job)  # creates the batch, which is still processing
    assert [b.status for b in state.active_batches()] == [BatchStatus.IN_PROGRESS]
    second = coordinator(emulator, state)  # knows nothing but the DB
    await run_until(second, state, [job.job_id], passes=200)
    await second.stop()
    assert state.get_job(job.job_id).status is JobStatus.ANSWERED
    assert emulator.app.calls["create"] == 1


@pytest.mark.anyio
async def test_a_dropped_create_response_is_adopted_not_duplicated(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    job = prepared_job(state, bundle_texts(0), name="dropped")
    emulator.faults.drop_create_responses = 1
    await settle(coordinator(emulator, state), state, job)
    assert state.get_job(job.job_id).status is JobStatus.ANSWERED
    assert emulator.app.calls["create"] == 1  # the lost response was found by listing, not re-created
    assert emulator.app.calls["list"] >= 1


@pytest.mark.anyio
async def test_malformed_answers_are_repaired_or_retried(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    job = prepared_job(state, bundle_texts(0), name="malformed")
    sent = frozenset(sent_id(state, c.request.custom_id) for c in job.chunks.values())
    emulator.faults.malformed_ids = sent
    coord = coordinator(emulator, state)
    await offer(coord, job)
    await coord.flush()
    await coord.step()
    emulator.faults.malformed_ids = frozenset()
    await run_until(coord, state, [job.job_id])
    await coord.stop()
    assert state.get_job(job.job_id).status is JobStatus.ANSWERED


@pytest.mark.anyio
async def test_a_spend_limit_parks_work_instead_of_failing_it(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    clock = FakeClock()
    clock.advance(1000.0)  # a monotonic time well past zero

    job = prepared_job(state, bundle_texts(0), name="parked", mode="sync")
    emulator.faults.spend_limit = True
    coord = BatchCoordinator(claude_settings(emulator), state, autostart=False, monotonic=clock.monotonic)
    await offer(coord, job, mode="sync")
    await coord.flush()
    await coord.step()
    await asyncio.gather(*coord._sync_tasks)
    assert (await coord.snapshot()).parked
    chunks = state.get_chunks(job.job_id)
    assert {c.status for c in chunks} == {ChunkStatus.PREPARED}  # parked, not failed
    assert {c.attempts for c in chunks} == {0}
    assert state.get_job(job.job_id).status is JobStatus.PREPARED
    emulator.faults.spend_limit = False
    await coord.step()
    assert emulator.app.calls["messages"] <= len(job.chunks)  # nothing sent while parked
    clock.advance(3600)  # the limit was raised meanwhile
    await run_until(coord, state, [job.job_id])
    await coord.stop()
    assert state.get_job(job.job_id).status is JobStatus.ANSWERED


@pytest.mark.anyio
async def test_a_job_whose_payloads_are_gone_is_prepared_again(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    lost = prepared_job(state, bundle_texts(0), name="lost")
    kept = prepared_job(state, bundle_texts(1), name="kept")
    coord = coordinator(emulator, state)
    await coord.offer(lost.job_id, {0: lost.chunks[0]}, "batch", 1)  # chunk 1.. never offered
    await offer(coord, kept)
    await coord.flush()
    await run_until(coord, state, [kept.job_id])
    await coord.stop()
    lost_id, kept_id = lost.job_id, kept.job_id
    assert state.get_job(lost_id).status is JobStatus.PENDING
    assert state.get_job(kept_id).status is JobStatus.ANSWERED


@pytest.mark.anyio
async def test_a_pass_resolves_its_payloads_at_once_and_a_lost_one_sends_back_its_job_alone(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    jobs = [prepared_job(state, bundle_texts(b), name=f"b{b}") for b in range(3)]
    lost = jobs[1].chunks[0]  # its payload cannot be read (say its owner died)
    asked: list[int] = []

    async def resolve(payloads: list[object]) -> list[object]:
        asked.append(len(payloads))
        if any(payload is lost for payload in payloads):
            raise RuntimeError("the owner of this object died")
        return payloads

    coord = BatchCoordinator(claude_settings(emulator), state, autostart=False, resolve=resolve)
    for job in jobs:
        await offer(coord, job)
    await coord.flush()
    await run_until(coord, state, [jobs[0].job_id, jobs[2].job_id])
    await coord.stop()
    assert asked[:4] == [sum(len(j.chunks) for j in jobs), *(len(j.chunks) for j in jobs)]  # all, then each
    assert [state.get_job(j.job_id).status for j in jobs] == [
        JobStatus.ANSWERED,
        JobStatus.PENDING,
        JobStatus.ANSWERED,
    ]
