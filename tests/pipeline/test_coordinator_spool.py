"""The answer spool: synchronous answers the database refused, kept in the object store and filed
from it (once, by custom_id) before the lead releases any synchronous call. No Ray: the real SDK
against the emulator, the real SQLite state store, memory and local object stores."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from builders import PreparedJob, bundle_texts, claude_settings, prepared_job
from clock import FakeClock

from raybatch.claude.emulator import EmulatorServer
from raybatch.claude.records import RequestResult
from raybatch.claude.sync_client import AnthropicMessageClient
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.coordinator.spool import AnswerSpool, Spooled
from raybatch.errors import StorageUnavailable
from raybatch.ids import OutputKeys
from raybatch.models import ChunkStatus, JobStatus, ResultType, Usage
from raybatch.objects import LocalObjectStore, MemoryObjectStore
from raybatch.state import SqlStateStore

DEAD = "sync:a-coordinator-killed"  # the tag of a coordinator that never beats again
KEYS = OutputKeys("0123456789abcdef0123")


class StoreAway(MemoryObjectStore):
    """A memory store whose listing fails while ``away`` is set."""

    away = False

    def list(self, prefix: str = "") -> Any:
        if self.away:
            raise StorageUnavailable("the store went away (injected)")
        return super().list(prefix)


def test_the_spool_keeps_reads_and_drops_answers_by_custom_id() -> None:
    store = MemoryObjectStore()
    spool = AnswerSpool(store, KEYS)
    answer = RequestResult("job_3_batch_1", ResultType.SUCCEEDED, '{"documents": []}', Usage(10, 5, 1, 0))
    spool.keep("sync:abc", answer)
    spool.keep("sync:abc", answer)  # the same chunk again replaces it
    assert list(store.list()) == ["db-0123456789abcdef/spool/job_3_batch_1.json"]
    assert spool.read() == [Spooled("sync:abc", answer)]
    assert spool.read()[0].job_id == 3
    spool.drop(["job_3_batch_1", "job_3_batch_2"])  # a missing one is no error
    assert spool.read() == []
    with pytest.raises(ValueError, match="custom_id"):  # keys come from ids, never from anything else
        spool.keep("sync:abc", RequestResult("../invoice.pdf", ResultType.SUCCEEDED, "x"))


def test_a_local_spool_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    spool = AnswerSpool(LocalObjectStore(tmp_path), KEYS)
    spool.keep("sync:abc", RequestResult("job_1_batch_0", ResultType.ERRORED, error_type="api_error"))
    [path] = [p for p in tmp_path.rglob("job_1_batch_0.json")]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert b"test-key" not in path.read_bytes()  # answers only, never a secret


def _sent_and_spooled(emulator: EmulatorServer, state: SqlStateStore, spool: AnswerSpool) -> PreparedJob:
    """A job whose chunks a killed coordinator sent and got answered, with the answers in the spool."""
    job = prepared_job(state, bundle_texts(0), name="urgent", mode="sync")
    requests = [c.request for c in job.chunks.values()]
    state.mark_chunks_submitted([r.custom_id for r in requests], DEAD)
    outcome = AnthropicMessageClient(claude_settings(emulator)).send(requests)
    for result in outcome.results:
        spool.keep(DEAD, result)
    return job


def _coordinator(emulator: EmulatorServer, state: SqlStateStore, spool: AnswerSpool, clock: FakeClock) -> Any:
    settings = claude_settings(emulator, sweep_interval=1.0)
    return BatchCoordinator(
        settings, state, autostart=False, spool=spool, monotonic=clock.monotonic, sleep=lambda _: None
    )


@pytest.mark.anyio
async def test_the_lead_files_the_spool_before_releasing_and_files_it_once(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    spool = AnswerSpool(MemoryObjectStore(), OutputKeys(state.database_id()))
    job = _sent_and_spooled(emulator, state, spool)
    paid = sum(emulator.app.answers().values())
    clock = FakeClock()
    coord = _coordinator(emulator, state, spool, clock)
    await coord.step()  # the first sweep: spooled answers filed, then orphaned calls released
    assert state.get_job(job.job_id).status is JobStatus.ANSWERED
    assert {c.status for c in state.get_chunks(job.job_id)} == {ChunkStatus.SUCCEEDED}
    assert spool.read() == [], "filed answers stay in the spool"
    usage = state.usage_totals(job.job_id)

    for chunk in job.chunks.values():  # a copy left behind (its drop failed) is filed again: a no-op
        spool.keep(DEAD, RequestResult(chunk.request.custom_id, ResultType.ERRORED, error_type="api_error"))
    clock.advance(2.0)
    await coord.step()
    await coord.stop()
    assert {c.status for c in state.get_chunks(job.job_id)} == {ChunkStatus.SUCCEEDED}
    assert state.usage_totals(job.job_id) == usage, "an answer was filed twice"
    assert spool.read() == []
    assert sum(emulator.app.answers().values()) == paid, "a spooled chunk was sent to Claude again"


@pytest.mark.anyio
async def test_nothing_is_released_while_the_spool_cannot_be_read(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    store = StoreAway()
    spool = AnswerSpool(store, OutputKeys(state.database_id()))
    job = _sent_and_spooled(emulator, state, spool)
    paid = sum(emulator.app.answers().values())
    store.away = True
    clock = FakeClock()
    coord = _coordinator(emulator, state, spool, clock)
    await coord.offer(job.job_id, job.chunks, "sync", job.request_bytes)
    await coord.step()
    assert {c.status for c in state.get_chunks(job.job_id)} == {ChunkStatus.SUBMITTED}, "released unread"

    store.away = False
    clock.advance(2.0)
    await coord.step()
    await coord.stop()
    assert state.get_job(job.job_id).status is JobStatus.ANSWERED
    assert sum(emulator.app.answers().values()) == paid


@pytest.mark.anyio
async def test_a_coordinator_that_does_not_lead_files_the_spool_at_start(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    spool = AnswerSpool(MemoryObjectStore(), OutputKeys(state.database_id()))
    job = _sent_and_spooled(emulator, state, spool)
    assert state.beat("another-coordinator", 3600.0)  # it leads: it sweeps, this one does not
    coord = _coordinator(emulator, state, spool, FakeClock())
    await coord.step()
    await coord.stop()
    assert state.get_job(job.job_id).status is JobStatus.ANSWERED
    assert spool.read() == []
