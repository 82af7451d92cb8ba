"""The coordinator's backlog: what preparation must not outrun is what still waits for a batch."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest
from builders import bundle_texts, claude_settings, offer, prepared_job

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.coordinator.offers import LOOK_AT_ALL_SECONDS
from raybatch.models import JobStatus
from raybatch.settings import StateSettings
from raybatch.state import SqlStateStore, open_state


@pytest.mark.anyio
async def test_submitted_jobs_leave_the_backlog_while_their_batch_runs(tmp_path: Path) -> None:
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
    # a batch that takes a minute: the jobs stay submitted, unanswered, for the whole test
    with EmulatorServer(EmulatorConfig(processing_seconds=60)) as emulator:
        settings = claude_settings(emulator)
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


@pytest.mark.anyio
async def test_a_job_sent_back_for_a_retry_waits_in_the_backlog_again(tmp_path: Path) -> None:
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
    with EmulatorServer(EmulatorConfig(processing_seconds=0)) as emulator:
        settings = claude_settings(emulator)
        job = prepared_job(state, bundle_texts(0), name="flaky")
        emulator.faults.errored_fraction = 1.0  # every request comes back overloaded: asked again
        emulator.faults.errored_type = "overloaded_error"
        coord = BatchCoordinator(settings, state, autostart=False, monotonic=lambda: 0.0)
        await offer(coord, job)
        await coord.flush()
        for _ in range(50):  # sent; the batch ends; its errored answers send the job back to prepared
            await coord.step()
            if emulator.app.calls.get("create") and state.get_job(job.job_id).status is JobStatus.PREPARED:
                break
            await asyncio.sleep(0.05)
        again = await coord.snapshot()
        emulator.faults.errored_fraction = 0.0
        for _ in range(50):  # and it is sent again, with no look at every offer (the clock stands still)
            await coord.step()
            if state.get_job(job.job_id).status is JobStatus.ANSWERED:
                break
            await asyncio.sleep(0.05)
        await coord.stop()
    assert again.pending_bytes == job.request_bytes > 0  # to be sent again: it holds preparation back
    assert state.get_job(job.job_id).status is JobStatus.ANSWERED
    assert emulator.app.calls["create"] == 2


class Glances:
    """A state store's ``glance_jobs``, recording the jobs each call asked about."""

    def __init__(self, state: SqlStateStore) -> None:
        self.asked: list[list[int]] = []
        self._glance = state.glance_jobs
        state.glance_jobs = self  # type: ignore[method-assign]

    def __call__(self, job_ids: list[int], **kwargs: object) -> list[object]:
        self.asked.append(sorted(job_ids))
        return self._glance(job_ids, **kwargs)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_submit_passes_look_at_the_offers_in_flight_only_now_and_then(tmp_path: Path) -> None:
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
    clock = [0.0]
    with EmulatorServer(EmulatorConfig(processing_seconds=60)) as emulator:  # the batch stays in flight
        settings = claude_settings(emulator)
        jobs = [prepared_job(state, bundle_texts(b), name=f"b{b}") for b in (0, 1)]
        coord = BatchCoordinator(settings, state, autostart=False, monotonic=lambda: clock[0])
        for job in jobs:
            await offer(coord, job)
        await coord.flush()
        await coord.step()  # both sent in one batch
        glances = Glances(state)
        for _ in range(4):  # passes within LOOK_AT_ALL_SECONDS of the first
            clock[0] += 1.0
            await coord.step()
        between = list(glances.asked)
        clock[0] += LOOK_AT_ALL_SECONDS
        await coord.step()
        await coord.stop()
    ids = sorted(job.job_id for job in jobs)
    assert {state.get_job(i).status for i in ids} == {JobStatus.SUBMITTED}
    assert all(i not in asked for asked in between for i in ids)  # known to be sent: not asked about
    assert ids in glances.asked[len(between) :]  # every offer held, once in LOOK_AT_ALL_SECONDS


@pytest.mark.anyio
async def test_an_offer_ended_by_another_path_stops_holding_preparation_back(tmp_path: Path) -> None:
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
    clock = [0.0]
    with EmulatorServer(EmulatorConfig(processing_seconds=60)) as emulator:
        settings = claude_settings(emulator)
        job = prepared_job(state, bundle_texts(0), name="elsewhere")
        coord = BatchCoordinator(settings, state, autostart=False, monotonic=lambda: clock[0])
        await offer(coord, job)
        before = (await coord.snapshot()).pending_bytes
        state.fail_job(job.job_id, "review", "Canceled", "canceled in the console")  # not by the offers
        await coord.step()  # the first pass looks at every offer
        after = (await coord.snapshot()).pending_bytes
        await coord.stop()
    assert before == job.request_bytes > 0
    assert after == 0
    assert emulator.app.calls.get("create", 0) == 0  # not sent a second time


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("max_requests", "declared_bytes", "sent_in_one_pass"),
    [(10_000, None, 5), (3, None, 3), (10_000, 600_000, 2)],  # all; BATCH_MAX_REQUESTS; BATCH_MAX_MB
)
async def test_a_pass_sends_every_job_that_waits_up_to_a_batch(
    tmp_path: Path, max_requests: int, declared_bytes: int | None, sent_in_one_pass: int
) -> None:
    """BATCH_SIZE makes a batch due; the pass then takes the whole backlog (not BATCH_SIZE of it), at
    most BATCH_MAX_REQUESTS jobs and up to the job that fills BATCH_MAX_MB."""
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
    with EmulatorServer(EmulatorConfig(processing_seconds=60)) as emulator:
        settings = claude_settings(emulator, batch_size=2, batch_max_requests=max_requests, batch_max_mb=1)
        jobs = [prepared_job(state, bundle_texts(b % 2), name=f"b{b}") for b in range(5)]
        sizes = [declared_bytes or job.request_bytes for job in jobs]
        coord = BatchCoordinator(settings, state, autostart=False, monotonic=lambda: 0.0)
        for job, size in zip(jobs, sizes, strict=True):
            await coord.offer(job.job_id, job.chunks, "batch", size)
        await coord.step()  # due: BATCH_SIZE jobs wait; no flush, no time passed
        after = await coord.snapshot()
        await coord.stop()
    statuses = [state.get_job(job.job_id).status for job in jobs]
    assert statuses.count(JobStatus.SUBMITTED) == sent_in_one_pass, statuses
    assert after.pending_bytes == sum(sizes[sent_in_one_pass:])


@pytest.mark.anyio
async def test_a_synchronous_pass_asks_about_the_synchronous_offers_only(tmp_path: Path) -> None:
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
    clock = [0.0]
    with EmulatorServer(EmulatorConfig(processing_seconds=60)) as emulator:
        settings = claude_settings(emulator)  # BATCH_SIZE 30: five batch jobs are not due
        waiting = [prepared_job(state, bundle_texts(b % 2), name=f"w{b}") for b in range(5)]
        urgent = prepared_job(state, bundle_texts(0), name="urgent", mode="sync")
        coord = BatchCoordinator(settings, state, autostart=False, monotonic=lambda: clock[0])
        for job in waiting:
            await offer(coord, job)
        await coord.step()  # the first pass looks at every offer; nothing is due
        clock[0] += 1.0
        await offer(coord, urgent, mode="sync")
        glances = Glances(state)
        await coord._submitter.submit_phase(sync_only=True)
        await coord.stop()
    assert glances.asked == [[urgent.job_id]]
    assert state.get_job(urgent.job_id).status in {JobStatus.SUBMITTED, JobStatus.ANSWERED}
    assert {state.get_job(job.job_id).status for job in waiting} == {JobStatus.PREPARED}


@pytest.mark.anyio
@pytest.mark.parametrize("sooner_by", ["a full batch", "the driver's flush"])
async def test_a_stream_of_offers_goes_in_one_batch_a_poll_interval_not_one_a_pass(
    emulator: EmulatorServer, state: SqlStateStore, sooner_by: str
) -> None:
    """BATCH_SIZE jobs waiting make a batch due only when none went out in the last POLL_INTERVAL:
    a warm coordinator fed a stream sends a batch every POLL_INTERVAL (each batch is a create, its
    polls while it runs and a results fetch), not one every pass. A full batch and the
    driver's flush go at once."""
    jobs = [prepared_job(state, bundle_texts(b % 3), name=f"b{b}") for b in range(7)]
    clock = [1000.0]
    settings = claude_settings(emulator, batch_size=2, batch_max_requests=3, poll_interval=10.0)
    coord = BatchCoordinator(settings, state, autostart=False, monotonic=lambda: clock[0])
    sent = {JobStatus.SUBMITTED, JobStatus.ANSWERED}

    async def offered(*indexes: int) -> list[bool]:
        for i in indexes:
            await offer(coord, jobs[i])
        await coord.step()
        return [state.get_job(job.job_id).status in sent for job in jobs]

    assert await offered(0, 1) == [True, True, False, False, False, False, False]  # BATCH_SIZE wait
    creates = emulator.app.calls["create"]
    assert await offered(2, 3) == [True, True, False, False, False, False, False]  # a batch just went
    clock[0] += 5.0
    assert not any((await offered())[2:])  # half a POLL_INTERVAL later they still wait
    assert emulator.app.calls["create"] == creates
    clock[0] += 5.0
    assert await offered() == [True, True, True, True, False, False, False]  # both, in one pass
    await offer(coord, jobs[4])
    await offer(coord, jobs[5])  # BATCH_SIZE wait, within POLL_INTERVAL of the last batch
    if sooner_by == "a full batch":
        assert await offered(6) == [True] * 7  # BATCH_MAX_REQUESTS jobs wait: at once
    else:
        await coord.flush()
        assert await offered() == [True] * 6 + [False]
    await coord.stop()
