"""A job's progress: over all its chunks when they are spread over several batches, what was answered
once a batch ended (a chunk that goes again is not done), and as its answers come back when it is
sent synchronously."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest
from builders import bundle_texts, claude_settings, offer, prepared_job
from group_support import answer

from raybatch.claude.records import BatchState, PreparedRequest, RequestResult
from raybatch.claude.sync_client import SyncOutcome
from raybatch.coordinator.batch_poll import BatchPolls
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.coordinator.filer import ResultFiler
from raybatch.metrics import Metrics
from raybatch.models import BatchStatus, ChunkStatus, JobStatus, ResultType, Usage
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


class Ended:
    """A batch the API reports ended, with the results given."""

    def __init__(self, results: Sequence[RequestResult]) -> None:
        self._results = results

    def retrieve(self, batch_id: str) -> BatchState:
        now = datetime.now(UTC)
        return BatchState(batch_id, BatchStatus.ENDED, {"succeeded": 1, "errored": 1}, now, now, None)

    @contextmanager
    def results(self, batch_id: str) -> Iterator[Iterator[RequestResult]]:
        yield iter(self._results)


@pytest.mark.anyio
async def test_a_job_whose_chunk_goes_again_shows_what_was_answered_once_its_batch_ended(
    state: SqlStateStore,
) -> None:
    job = prepared_job(state, bundle_texts(0)[:16], name="again", mode="batch")  # two chunks
    first, second = (job.chunks[n].request.custom_id for n in (0, 1))
    intent = state.record_batch_intent([first, second], 1000)
    state.attach_batch(intent, "msgbatch_ended", BatchStatus.IN_PROGRESS, "{}")
    api = Ended(
        [
            RequestResult(first, ResultType.SUCCEEDED, text=answer(8, 1), usage=Usage(input_tokens=5)),
            RequestResult(second, ResultType.ERRORED, error_type="overloaded_error", error_message="busy"),
        ]
    )
    filer = ResultFiler(state, max_attempts=3)

    async def settle(jobs: set[int]) -> None:
        filer.settle_all(jobs)

    polls = BatchPolls(state, api, filer, io=_io, settle=settle, metrics=Metrics())  # type: ignore[arg-type]
    await polls.poll()
    statuses = {c.custom_id: c.status for c in state.get_chunks(job.job_id)}
    assert statuses[first] is ChunkStatus.SUCCEEDED and statuses[second] is not ChunkStatus.SUCCEEDED
    # Half of it answered, the other half to be sent again: not done, whatever the batch's counts.
    assert state.get_job(job.job_id).status is JobStatus.PREPARED
    assert state.get_job(job.job_id).progress == 50.0


class AnswersOneByOne:
    """Synchronous calls that answer each request in turn (a usable answer, or ``"{}"`` for the
    chunks in ``unusable``), noting the job's progress after each."""

    def __init__(self, state: SqlStateStore, unusable: frozenset[int] = frozenset()) -> None:
        self._state = state
        self._unusable = unusable
        self.seen: list[float] = []

    def send(
        self, requests: Sequence[PreparedRequest], *, on_result: Callable[[RequestResult], None]
    ) -> SyncOutcome:
        for request in requests:
            pages = request.last_page - request.first_page + 1
            text = "{}" if request.n in self._unusable else answer(pages, request.n, first=request.first_page)
            on_result(RequestResult(request.custom_id, ResultType.SUCCEEDED, text=text))
            self.seen.append(self._state.get_job(request.job_id).progress)
        return SyncOutcome([], [r.custom_id for r in requests])  # each was filed as it came


@pytest.mark.parametrize(("unusable", "seen"), [(frozenset(), [50.0, 100.0]), (frozenset({0}), [0.0, 50.0])])
@pytest.mark.anyio
async def test_a_synchronous_job_shows_progress_as_its_chunks_are_answered(
    state: SqlStateStore, unusable: frozenset[int], seen: list[float]
) -> None:
    # An answer filed counts once (not again as "come back"); an unusable one goes again: not done.
    job = prepared_job(state, bundle_texts(0)[:16], name="urgent", mode="sync")
    calls = AnswersOneByOne(state, unusable)
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
    assert calls.seen == seen
