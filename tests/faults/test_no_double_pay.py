"""A chunk in a live batch is never reset or sent again; a create is never repeated; adoption is checked."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from builders import bundle_texts, prepared_job, send_and_stop, settle
from fault_support import FlakyState, assert_ledger, claude, coordinator

from raybatch.claude.batch_client import AnthropicBatchClient
from raybatch.claude.emulator import EmulatorServer
from raybatch.models import JobStatus
from raybatch.settings import StateSettings
from raybatch.state import SqlStateStore, open_state


@pytest.mark.anyio
async def test_preparing_a_job_again_keeps_its_chunks_in_a_live_batch(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    emulator.config.processing_seconds = 1.0
    job = prepared_job(state, bundle_texts(0), name="reprepared")

    await send_and_stop(coordinator(emulator, state), job)  # the batch is created and recorded ...
    # ... and the driver died before the job was settled; a new driver prepares it again.
    state.transition(job.job_id, [JobStatus.SUBMITTED], JobStatus.PENDING)
    state.save_chunks(job.job_id, [c.record() for c in job.chunks.values()])
    state.transition(job.job_id, [JobStatus.PENDING], JobStatus.PREPARED)
    await settle(coordinator(emulator, state), state, job)
    assert emulator.app.calls["create"] == 1
    assert_ledger(state, emulator.app.answers(), answered=[job.job_id])


@pytest.mark.anyio
async def test_an_error_recording_a_created_batch_never_creates_it_again(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    job = prepared_job(state, bundle_texts(0), name="unrecorded")
    flaky = FlakyState(state)
    flaky.fail["attach_batch"] = 2  # the create worked; recording it fails, twice

    await settle(coordinator(emulator, flaky), state, job)
    assert flaky.failed == ["attach_batch", "attach_batch"]
    assert emulator.app.calls["create"] == 1
    assert_ledger(state, emulator.app.answers(), answered=[job.job_id])


@pytest.mark.anyio
async def test_a_restart_between_create_and_record_adopts_the_batch(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    job = prepared_job(state, bundle_texts(0), name="crashed")
    flaky = FlakyState(state)
    flaky.fail["attach_batch"] = 1

    await send_and_stop(coordinator(emulator, flaky), job)  # created, not recorded: then the process dies
    await settle(coordinator(emulator, state), state, job)
    assert emulator.app.calls["create"] == 1
    assert_ledger(state, emulator.app.answers(), answered=[job.job_id])


@pytest.mark.anyio
async def test_a_foreign_batch_found_for_a_lost_create_is_never_filed(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    job = prepared_job(state, bundle_texts(0), name="ours")
    ours = [c.request for c in sorted(job.chunks.values(), key=lambda c: c.request.n)]
    state.record_batch_intent([r.custom_id for r in ours], 1)  # our create's response was lost ...
    # ... and another database on the workspace made a batch as large, one custom_id like ours.
    theirs = [ours[0]] + [dataclasses.replace(r, custom_id=f"job_9{r.job_id}_batch_{r.n}") for r in ours[1:]]
    with AnthropicBatchClient(claude(emulator)) as client:
        foreign = client.create(theirs)

    await settle(coordinator(emulator, state), state, job)
    chunks = state.get_chunks(job.job_id)
    assert foreign.id not in {c.batch_id for c in chunks}, "an answer of the foreign batch was filed"
    assert {c.attempts for c in chunks} == {0}, "its requests were not ours: no try is counted"
    assert_ledger(state, {}, answered=[job.job_id])


@pytest.mark.anyio
async def test_another_databases_batch_of_the_same_custom_ids_is_never_adopted(
    emulator: EmulatorServer, state: SqlStateStore, tmp_path: Path
) -> None:
    """Job numbers repeat across databases: two databases on one workspace send job 1's chunks under
    the same chunk custom_ids. A lost create of ours must not adopt the other database's batch."""
    other = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'other.db'}"))
    assert other.database_id() != state.database_id()
    job = prepared_job(state, bundle_texts(0), name="ours")
    theirs = prepared_job(other, bundle_texts(0), name="theirs")
    assert {c.request.custom_id for c in job.chunks.values()} == {
        c.request.custom_id for c in theirs.chunks.values()
    }, "the same custom_ids in both databases"
    ours = [c.request for c in sorted(job.chunks.values(), key=lambda c: c.request.n)]
    state.record_batch_intent([r.custom_id for r in ours], 1)  # our create's response was lost ...

    await send_and_stop(coordinator(emulator, other), theirs)  # ... and the other database made its batch
    await settle(coordinator(emulator, state), state, job)
    foreign = {b.anthropic_id for b in other.active_batches()} | set(other.known_batch_ids())
    chunks = state.get_chunks(job.job_id)
    assert foreign and not foreign & {c.batch_id for c in chunks}, "an answer of their batch was filed"
    assert emulator.app.calls["create"] == 2, "ours was created once, after their batch was refused"


def test_a_sent_custom_id_is_marked_with_its_database_and_stays_valid() -> None:
    from raybatch.ids import CUSTOM_ID_PATTERN, marked_custom_id, unmarked_custom_id

    ours, theirs = "3f2a9c01b7d4" + "0" * 20, "a1b2c3d4e5f6" + "0" * 20
    sent = marked_custom_id("job_123456789_batch_9999", ours)
    assert CUSTOM_ID_PATTERN.match(sent) and len(sent) <= 64
    assert unmarked_custom_id(sent, ours) == "job_123456789_batch_9999"
    assert unmarked_custom_id(marked_custom_id("job_1_batch_0", theirs), ours) is None
    assert unmarked_custom_id("job_1_batch_0", ours) == "job_1_batch_0", "sent before marks existed"
