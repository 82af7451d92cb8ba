"""Bulk filing and settling: a batch's results filed, and its jobs moved, a few statements at once."""

from __future__ import annotations

import pytest
from state_helpers import chunk, register

from raybatch.models import ChunkStatus, JobStatus, ResultType, Usage
from raybatch.state import SqlStateStore
from raybatch.state.port import ChunkResult

USAGE = Usage(input_tokens=1000, output_tokens=200, cache_read_tokens=30, cache_creation_tokens=4)


def test_a_batch_of_results_is_filed_at_once_as_one_by_one_would_be(store: SqlStateStore) -> None:
    job = register(store, 1)[0].id
    cid = [f"job_{job}_batch_{n}" for n in range(6)]
    store.save_chunks(job, [chunk(job, n) for n in range(6)])
    assert store.mark_chunks_submitted(cid[:5], "msgbatch_1") == 5
    assert store.mark_chunks_submitted(cid[5:], "msgbatch_2") == 1  # sent again under a new batch
    results = [
        ChunkResult(cid[0], ResultType.SUCCEEDED, answer='{"a":1}', usage=USAGE),
        ChunkResult(cid[1], ResultType.EXPIRED, error_message="expired", retry=True),
        ChunkResult(cid[2], ResultType.ERRORED, usage=USAGE, error_class="UnparseableAnswer", retry=True),
        ChunkResult(cid[3], ResultType.ERRORED, error_class="invalid_request_error", error_message="bad"),
        ChunkResult(cid[0], ResultType.SUCCEEDED, answer="dup", usage=USAGE),  # a duplicate: the first counts
        ChunkResult(cid[5], ResultType.SUCCEEDED, answer="old", usage=USAGE),  # the old batch's answer
        ChunkResult("job_999_batch_0", ResultType.SUCCEEDED, answer="?"),
    ]

    assert store.file_results("msgbatch_1", results, max_attempts=2) == set(cid[:4])

    answered, retried, unusable, failed, waiting, resent = store.get_chunks(job)
    assert (answered.status, answered.answer, answered.output_tokens) == (
        ChunkStatus.SUCCEEDED,
        '{"a":1}',
        200,
    )
    assert (answered.sent_mode, answered.error_class) == ("batch", None)
    assert (retried.status, retried.attempts, retried.error_class) == (ChunkStatus.RETRY, 1, "expired")
    assert (unusable.status, unusable.input_tokens) == (ChunkStatus.RETRY, 0)
    assert (failed.status, failed.attempts, failed.error_message) == (ChunkStatus.FAILED, 1, "bad")
    assert (waiting.status, resent.status, resent.batch_id) == (
        ChunkStatus.SUBMITTED,
        ChunkStatus.SUBMITTED,
        "msgbatch_2",
    ), "a chunk sent again is not overwritten by an old batch's answer"
    assert store.usage_totals(job) == Usage(2000, 400, 60, 8), "the unusable answer stays counted"

    before = store.get_chunks(job)
    assert store.file_results("msgbatch_1", results, max_attempts=2) == set(), "filed again: no change"
    assert store.get_chunks(job) == before
    assert store.usage_totals(job) == Usage(2000, 400, 60, 8)

    assert store.mark_chunks_submitted([cid[1]], "msgbatch_3") == 1
    again = [ChunkResult(cid[1], ResultType.EXPIRED, retry=True)]
    assert store.file_results("msgbatch_3", again, max_attempts=2) == {cid[1]}
    assert store.get_chunks(job)[1].status is ChunkStatus.FAILED, "its tries are spent"
    with pytest.raises(ValueError):
        store.file_results("msgbatch_2", [ChunkResult(cid[5], ResultType.SUCCEEDED)])


def test_jobs_move_together_and_a_cancel_still_wins(store: SqlStateStore) -> None:
    a, b, c = (register(store, n)[0].id for n in (1, 2, 3))
    for job in (a, b, c):
        assert store.transition(job, [JobStatus.PENDING], JobStatus.PREPARED)
    assert store.transition(c, [JobStatus.PREPARED], JobStatus.CANCELED)

    assert store.transition_jobs([a, b, c, 999], [JobStatus.PREPARED], JobStatus.SUBMITTED) == {a, b}
    moved = store.transition_jobs([a, c], [JobStatus.SUBMITTED], JobStatus.ANSWERED, progress=100.0)

    assert moved == {a}
    statuses = store.job_statuses([a, b, c])
    assert statuses == {a: JobStatus.ANSWERED, b: JobStatus.SUBMITTED, c: JobStatus.CANCELED}
    assert store.get_job(a).progress == 100.0
    assert store.transition_jobs([], [JobStatus.PREPARED], JobStatus.SUBMITTED) == set()
