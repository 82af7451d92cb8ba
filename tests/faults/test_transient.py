"""Transient trouble parks or retries work; only what will never succeed fails a job."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import bundle_texts, offer, prepared_job, run_until, settle
from clock import FakeClock
from driver_support import pending_job
from fault_support import FlakyState, assert_ledger, coordinator
from ray.exceptions import RayTaskError
from test_scheduler import FakeTasks, scheduler

from raybatch.claude.emulator import EmulatorServer
from raybatch.cli import main
from raybatch.errors import StorageUnavailable, retried_on_rerun
from raybatch.ids import sha256_bytes
from raybatch.models import ChunkRecord, ChunkStatus, JobStatus, SourceKind
from raybatch.state import SqlStateStore


@pytest.mark.anyio
async def test_an_overloaded_api_parks_the_batch_instead_of_failing_its_jobs(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    job = prepared_job(state, bundle_texts(0), name="storm")
    emulator.faults.overloaded_fraction = 1.0
    emulator.faults.endpoints = frozenset({"create"})
    clock = FakeClock()
    clock.advance(1000.0)  # a monotonic time well past zero

    coord = coordinator(emulator, state, clock=clock, outage_budget=0.5, park_seconds=60)
    await offer(coord, job)
    await coord.flush()
    await coord.step()  # 529s for longer than the budget
    assert (await coord.snapshot()).parked
    assert state.get_job(job.job_id).status is JobStatus.PREPARED
    await coord.step()
    assert emulator.app.calls["create"] == 1, "nothing is sent while parked"
    emulator.faults.overloaded_fraction = 0.0  # the outage ends
    clock.advance(61)
    await run_until(coord, state, [job.job_id])
    await coord.stop()
    assert_ledger(state, emulator.app.answers(), answered=[job.job_id])


@pytest.mark.anyio
async def test_a_database_error_while_filing_sync_answers_keeps_them(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    job = prepared_job(state, bundle_texts(0), name="urgent", mode="sync")
    flaky = FlakyState(state)
    flaky.fail["file_results"] = 2

    await settle(coordinator(emulator, flaky), state, job, mode="sync")
    assert flaky.failed == ["file_results", "file_results"]
    assert_ledger(state, emulator.app.answers(), answered=[job.job_id])
    assert sum(emulator.app.answers().values()) == len(job.chunks), "paid once each"


@pytest.mark.anyio
async def test_rejected_credentials_stop_the_run_with_a_clear_message(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    emulator.config.api_key = "the-right-key"
    first = prepared_job(state, bundle_texts(0), name="first")
    later = prepared_job(state, bundle_texts(1), name="later")

    coord = coordinator(emulator, state)
    await offer(coord, first)
    await coord.flush()
    await run_until(coord, state, [first.job_id])
    await offer(coord, later)
    await run_until(coord, state, [later.job_id])
    stopped = (await coord.snapshot()).stopped
    await coord.stop()
    assert stopped is not None and "ANTHROPIC_API_KEY" in stopped
    assert emulator.app.calls["create"] == 1, "nothing more is sent once the key was refused"
    assert_ledger(
        state, {}, failed={first.job_id: "AuthenticationFailed", later.job_id: "AuthenticationFailed"}
    )
    assert retried_on_rerun("AuthenticationFailed"), "a run with the right key takes them up again"


def register(state: SqlStateStore, name: str) -> int:
    job, _ = state.register_job(
        sha256=sha256_bytes(name.encode()),
        source_uri=f"file:///{name}",
        source_name=name,
        kind=SourceKind.PDF,
        size_bytes=10,
    )
    return job.id


def test_a_rerun_takes_up_jobs_failed_for_a_passing_reason_and_keeps_their_answers(
    state: SqlStateStore,
) -> None:
    passing, lasting = register(state, "passing.pdf"), register(state, "lasting.pdf")
    answered = ChunkRecord(
        passing, 0, 1, 8, f"job_{passing}_batch_0", "k", ChunkStatus.SUCCEEDED, answer="{}"
    )
    state.save_chunks(passing, [answered])
    state.fail_job(passing, "claude", "overloaded_error", "chunk 1: errored: overloaded_error")
    state.fail_job(lasting, "prepare", "InvalidSource", "the PDF is encrypted")

    assert register(state, "passing.pdf") == passing and register(state, "lasting.pdf") == lasting

    assert state.get_job(passing).status is JobStatus.PENDING
    assert state.get_job(passing).error_class is None
    assert state.get_chunks(passing)[0].status is ChunkStatus.SUCCEEDED, "the paid answer is kept"
    assert state.get_job(lasting).status is JobStatus.FAILED


def test_retry_command_takes_up_failed_jobs_on_purpose(state: SqlStateStore, tmp_path: Path) -> None:
    first, second = register(state, "a.pdf"), register(state, "b.pdf")
    state.fail_job(first, "prepare", "InvalidSource", "corrupt")
    state.fail_job(second, "claude", "UnparseableAnswer", "no JSON")
    url = state._url.render_as_string(hide_password=False)

    assert main(["retry", str(first), "--db", url, "--store", str(tmp_path)]) == 0
    assert state.get_job(first).status is JobStatus.PENDING
    assert state.get_job(second).status is JobStatus.FAILED
    assert main(["retry", "--failed", "--db", url, "--store", str(tmp_path)]) == 0
    assert state.get_job(second).status is JobStatus.PENDING


def test_a_storage_blip_while_preparing_sends_the_job_back_not_to_failure(state: SqlStateStore) -> None:
    job = pending_job(state, 1, pages=8)
    tasks = FakeTasks()
    tasks.failing[job, 0] = RayTaskError("prepare_chunk", "traceback", StorageUnavailable("S3 timed out"))
    sched = scheduler(state, tasks, 4)
    sched.claim([job])
    sched.tick(0)
    tasks.finish_all(sched)
    sched.tick(0)
    assert state.get_job(job).status is JobStatus.PENDING
    del tasks.failing[job, 0]
    sched.claim([job])
    for _ in range(3):
        tasks.finish_all(sched)
        sched.tick(0)
    assert state.get_job(job).status is JobStatus.PREPARED
