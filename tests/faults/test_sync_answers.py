"""Paid synchronous answers are never dropped: not when the credentials are rejected partway
through the calls, not when the coordinator is killed (SIGKILL of its process) while the database
is away after the answers came back, nor when it went away before they came back (the answers are
then in the spool only)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from builders import PreparedJob, bundle_texts, offer, prepared_job, run_until
from clock import FORK
from fault_support import FlakyState, assert_ledger, claude, coordinator

from raybatch.claude.emulator import EmulatorServer
from raybatch.claude.sync_client import AnthropicMessageClient
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.coordinator.spool import AnswerSpool
from raybatch.errors import DatabaseUnavailable
from raybatch.ids import OutputKeys
from raybatch.models import ChunkStatus, JobStatus
from raybatch.objects import LocalObjectStore
from raybatch.state import SqlStateStore
from raybatch.state.base import utc_now


class KeyRevokedAfter(AnthropicMessageClient):
    """The key is revoked at the emulator once ``answers`` calls were answered."""

    def __init__(self, settings: Any, emulator: EmulatorServer, answers: int) -> None:
        super().__init__(settings)
        self._emulator, self._left = emulator, answers

    def send_one(self, request: Any) -> Any:
        result = super().send_one(request)
        self._left -= 1
        if self._left == 0:
            self._emulator.config.api_key = "a-key-rotated-meanwhile"
        return result


@pytest.mark.anyio
async def test_an_auth_failure_partway_keeps_the_answers_already_returned(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    job = prepared_job(state, bundle_texts(0), name="urgent", mode="sync")
    settings = claude(emulator, sync_concurrency=1)  # one call after the other
    messages = KeyRevokedAfter(settings, emulator, answers=2)
    coord = BatchCoordinator(settings, state, autostart=False, messages=messages, sleep=lambda _: None)
    await offer(coord, job, mode="sync")
    await coord.flush()
    await run_until(coord, state, [job.job_id])
    await coord.stop()
    assert state.get_job(job.job_id).error_class == "AuthenticationFailed"
    statuses = [c.status for c in state.get_chunks(job.job_id)]
    assert statuses.count(ChunkStatus.SUCCEEDED) == 2, "the answers returned before the 401 were dropped"

    emulator.config.api_key = None  # the right key: the next run takes the job up
    assert state.reopen_job(job.job_id)
    state.transition(job.job_id, [JobStatus.PENDING], JobStatus.PREPARED)
    again = coordinator(emulator, state)
    await offer(again, job, mode="sync")
    await again.flush()
    await run_until(again, state, [job.job_id])
    await again.stop()
    assert_ledger(state, emulator.app.answers(), answered=[job.job_id])


def test_a_coordinator_killed_with_unfiled_sync_answers_loses_none(
    emulator: EmulatorServer, state: SqlStateStore, db: str
) -> None:
    job = prepared_job(state, bundle_texts(0), name="urgent", mode="sync")
    answered = FORK.Event()
    calls = (
        "file_results",
        "transition",
        "transition_jobs",
        "fail_job",
        "get_chunks",
        "chunks_of",
        "set_progress",
        "release_chunks",
    )
    child = FORK.Process(
        target=_coordinate_then_lose_the_database, args=(db, emulator.base_url, job, answered, calls)
    )
    child.start()
    try:
        assert answered.wait(120), "the calls were not answered"
        time.sleep(0.5)  # a few passes fail on the database meanwhile
    finally:
        os.kill(child.pid or 0, signal.SIGKILL)
        child.join(30)
    assert child.exitcode == -signal.SIGKILL
    paid = sum(emulator.app.answers().values())
    assert paid == len(job.chunks)

    # The database is back; the coordinator that takes over sees the killed one's beat lapse.
    later = SqlStateStore.from_url(db, now=lambda: utc_now() + timedelta(hours=1))
    coord = coordinator(emulator, later)

    async def take_over() -> None:
        await offer(coord, job, mode="sync")
        await coord.flush()
        await run_until(coord, later, [job.job_id])
        await coord.stop()

    asyncio.run(take_over())
    assert_ledger(state, emulator.app.answers(), answered=[job.job_id])


# What a coordinator asks the database during a synchronous call and its passes.
_COORDINATOR_CALLS = (
    "file_results",
    "get_chunks",
    "chunks_of",
    "transition",
    "transition_jobs",
    "fail_job",
    "set_progress",
    "chunk_progress",
    "release_chunks",
    "beat",
    "is_paused",
    "glance_jobs",
    "submitted_chunk_ids",
    "release_orphaned_sync_chunks",
)


def _spool(root: Path, database_id: str) -> AnswerSpool:
    return AnswerSpool(LocalObjectStore(root), OutputKeys(database_id))


def _coordinate_then_lose_the_database(
    db: str,
    url: str,
    job: PreparedJob,
    answered: Any,
    calls: tuple[str, ...] = _COORDINATOR_CALLS,
    spool_at: tuple[Path, str] | None = None,
    before_answers: bool = False,
) -> None:
    """A coordinator process whose database goes away for good (``calls`` fail) once its calls'
    answers are back, or once they are sent, before any answer (``before_answers``)."""
    flaky = FlakyState(SqlStateStore.from_url(db))
    outage = {"on": False}
    for name in calls:
        flaky.fail[name] = 10**9
        flaky.when[name] = lambda *_, **__: outage["on"]
    messages = AnthropicMessageClient(claude(url))
    send = messages.send

    def send_with_outage(*args: Any, **kwargs: Any) -> Any:
        outage["on"] = before_answers  # sent: no answer can be filed from now on
        outcome = send(*args, **kwargs)
        outage["on"] = True  # the answers are back; the database is not
        answered.set()
        return outcome

    messages.send = send_with_outage  # type: ignore[method-assign]
    spool = _spool(*spool_at) if spool_at else None
    coord = BatchCoordinator(
        claude(url), flaky, autostart=False, messages=messages, sleep=lambda _: None, spool=spool
    )

    async def go() -> None:
        await offer(coord, job, mode="sync")
        await coord.flush()
        while True:  # until killed
            with contextlib.suppress(DatabaseUnavailable):
                await coord.step()
            await asyncio.sleep(0.05)

    asyncio.run(go())


def test_a_coordinator_killed_with_sync_answers_the_database_never_took_loses_none(
    emulator: EmulatorServer, state: SqlStateStore, db: str, tmp_path: Path
) -> None:
    job = prepared_job(state, bundle_texts(0), name="urgent", mode="sync")
    spool_at = (tmp_path / "store", state.database_id())
    answered = FORK.Event()
    child = FORK.Process(
        target=_coordinate_then_lose_the_database,
        args=(db, emulator.base_url, job, answered),
        kwargs={"spool_at": spool_at, "before_answers": True},
    )
    child.start()
    try:
        assert answered.wait(120), "the calls were not answered"
        time.sleep(0.5)  # a few passes fail on the database meanwhile
    finally:
        os.kill(child.pid or 0, signal.SIGKILL)
        child.join(30)
    assert child.exitcode == -signal.SIGKILL
    assert sum(emulator.app.answers().values()) == len(job.chunks)
    statuses = {c.status for c in state.get_chunks(job.job_id)}
    assert statuses == {ChunkStatus.SUBMITTED}, "the answers reached the database: nothing was unfiled"

    # The database is back; the coordinator that takes over sees the killed one's beat lapse.
    later = SqlStateStore.from_url(db, now=lambda: utc_now() + timedelta(hours=1))
    spool = _spool(*spool_at)
    coord = BatchCoordinator(claude(emulator), later, autostart=False, sleep=lambda _: None, spool=spool)

    async def take_over() -> None:
        await offer(coord, job, mode="sync")
        await coord.flush()
        await run_until(coord, later, [job.job_id])
        await coord.stop()

    asyncio.run(take_over())
    assert_ledger(state, emulator.app.answers(), answered=[job.job_id])
    assert sum(emulator.app.answers().values()) == len(job.chunks), "a spooled chunk was asked again"
    assert spool.read() == [], "the spool keeps answers already filed"
