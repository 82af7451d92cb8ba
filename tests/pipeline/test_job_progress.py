"""A job's progress: over all its chunks when they are spread over several batches, and as its
answers come back when it is sent synchronously."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

import pytest
from builders import bundle_texts, claude_settings, offer, prepared_job

from raybatch.claude.records import BatchState, PreparedRequest, RequestResult
from raybatch.claude.sync_client import SyncOutcome
from raybatch.coordinator.batch_poll import BatchPolls
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.metrics import Metrics
from raybatch.models import BatchStatus, ResultType
from raybatch.state import SqlStateStore


class InFlight:
    """Batches the API reports in progress, with the counts given."""

    def __init__(self, counts: Mapping[str, Mapping[str, int]]) -> None:
        self._counts = counts

    def retrieve(self, batch_id: str) -> BatchState:
        now = datetime.now(UTC)
        return BatchState(batch_id, BatchStatus.IN_PROGRESS, dict(self._counts[batch_id]), now, None, None)


async def _io(fn: Callable[..., object], *args: object, **kwargs: object) -> object:
    return fn(*args, **kwargs)


async def _settle(jobs: set[int]) -> None:
    return None


@pytest.mark.anyio
async def test_a_job_over_two_batches_shows_progress_over_both(state: SqlStateStore) -> None:
    job = prepared_job(state, bundle_texts(0)[:16], name="two", mode="batch")  # two chunks
    first, second = (job.chunks[n].request.custom_id for n in (0, 1))
    for cid, batch in ((first, "msgbatch_done"), (second, "msgbatch_half")):
        intent = state.record_batch_intent([cid], 1000)
        state.attach_batch(intent, batch, BatchStatus.IN_PROGRESS, "{}")
    api = InFlight({"msgbatch_done": {"succeeded": 1}, "msgbatch_half": {"processing": 1, "succeeded": 1}})
    polls = BatchPolls(state, api, None, io=_io, settle=_settle, metrics=Metrics())  # type: ignore[arg-type]
    await polls.poll()
    # One batch all done, the other half: three quarters of the job, whichever was polled last.
    assert state.get_job(job.job_id).progress == 75.0


class AnswersOneByOne:
    """Synchronous calls that answer each request in turn, noting the job's progress after each."""

    def __init__(self, state: SqlStateStore) -> None:
        self._state = state
        self.seen: list[float] = []

    def send(
        self, requests: Sequence[PreparedRequest], *, on_result: Callable[[RequestResult], None]
    ) -> SyncOutcome:
        for request in requests:
            on_result(RequestResult(request.custom_id, ResultType.SUCCEEDED, text="{}"))
            self.seen.append(self._state.get_job(request.job_id).progress)
        return SyncOutcome([], [r.custom_id for r in requests])  # then parked: nothing filed


@pytest.mark.anyio
async def test_a_synchronous_job_shows_progress_as_its_chunks_are_answered(state: SqlStateStore) -> None:
    job = prepared_job(state, bundle_texts(0)[:16], name="urgent", mode="sync")
    calls = AnswersOneByOne(state)
    coord = BatchCoordinator(
        claude_settings("http://127.0.0.1:9"),
        state,
        messages=calls,
        autostart=False,  # type: ignore[arg-type]
    )
    await offer(coord, job, mode="sync")
    await coord.step()
    await asyncio.gather(*coord._sync.tasks)
    await coord.stop()
    assert calls.seen == [50.0, 100.0]
