"""Chunks: upserts that keep succeeded answers, idempotent result filing, the retry budget, usage."""

from __future__ import annotations

from dataclasses import replace

import pytest
from state_helpers import chunk, register

from raybatch.models import ChunkStatus, JobStatus, ResultType, Usage
from raybatch.state import SqlStateStore

USAGE = Usage(input_tokens=1000, output_tokens=200, cache_read_tokens=30, cache_creation_tokens=4)


@pytest.fixture
def job_id(store: SqlStateStore) -> int:
    return register(store, 1)[0].id


def submit(store: SqlStateStore, job_id: int, ns: list[int], batch: str) -> None:
    assert store.mark_chunks_submitted([f"job_{job_id}_batch_{n}" for n in ns], batch) == len(ns)


def test_chunks_round_trip_in_order(store: SqlStateStore, job_id: int) -> None:
    records = [chunk(job_id, n) for n in (2, 0, 1)]
    store.save_chunks(job_id, records)
    assert store.get_chunks(job_id) == sorted(records, key=lambda c: c.n)
    with pytest.raises(ValueError):
        store.save_chunks(job_id + 1, records)


def test_the_chunks_of_several_jobs_come_in_one_read(store: SqlStateStore, job_id: int) -> None:
    other, empty = register(store, 2)[0].id, register(store, 3)[0].id
    store.save_chunks(job_id, [chunk(job_id, n) for n in (1, 0)])
    store.save_chunks(other, [chunk(other, 0)])
    found = store.chunks_of([other, job_id, empty])
    assert found == {job_id: store.get_chunks(job_id), other: store.get_chunks(other), empty: []}
    assert [c.n for c in found[job_id]] == [0, 1]


def test_saving_again_never_overwrites_a_succeeded_answer_or_a_chunk_in_flight(
    store: SqlStateStore, job_id: int
) -> None:
    store.save_chunks(job_id, [chunk(job_id, 0), chunk(job_id, 1)])
    submit(store, job_id, [0, 1], "msgbatch_1")
    assert store.file_result(
        f"job_{job_id}_batch_0", "msgbatch_1", ResultType.SUCCEEDED, answer="{}", usage=USAGE
    )

    store.save_chunks(job_id, [chunk(job_id, 0), chunk(job_id, 1), chunk(job_id, 2)])

    kept, redone, added = store.get_chunks(job_id)
    assert (kept.status, kept.answer, kept.input_tokens) == (ChunkStatus.SUCCEEDED, "{}", 1000)
    assert (redone.status, redone.batch_id) == (ChunkStatus.SUBMITTED, "msgbatch_1"), "its answer is coming"
    assert added.n == 2
    store.mark_batch_lost(store.record_batch_intent([], 0))  # an unrelated batch changes nothing
    store.file_result(f"job_{job_id}_batch_1", "msgbatch_1", ResultType.EXPIRED, retry=True)
    store.save_chunks(job_id, [chunk(job_id, 1)])
    assert store.get_chunks(job_id)[1].status is ChunkStatus.PREPARED, "once answered it may be redone"


def test_a_new_processing_key_replaces_a_succeeded_answer(store: SqlStateStore, job_id: int) -> None:
    store.save_chunks(job_id, [chunk(job_id, 0)])
    submit(store, job_id, [0], "msgbatch_1")
    store.file_result(f"job_{job_id}_batch_0", "msgbatch_1", ResultType.SUCCEEDED, answer="{}")

    store.save_chunks(job_id, [chunk(job_id, 0, key="v2")])  # another prompt version

    [fresh] = store.get_chunks(job_id)
    assert (fresh.status, fresh.answer, fresh.processing_key) == (
        ChunkStatus.PREPARED,
        None,
        chunk(job_id, 0, key="v2").processing_key,
    )


def test_a_result_is_filed_once_and_only_for_its_batch(store: SqlStateStore, job_id: int) -> None:
    cid = f"job_{job_id}_batch_0"
    store.save_chunks(job_id, [chunk(job_id, 0)])
    assert store.mark_chunks_submitted([cid, "job_999_batch_0"], "msgbatch_1") == 1

    assert not store.file_result(cid, "msgbatch_old", ResultType.SUCCEEDED, answer="stale")
    assert not store.file_result("job_999_batch_0", "msgbatch_1", ResultType.SUCCEEDED, answer="?")
    assert not store.file_result("not-ours", "msgbatch_1", ResultType.ERRORED, retry=True)
    assert store.file_result(cid, "msgbatch_1", ResultType.SUCCEEDED, answer='{"a":1}', usage=USAGE)
    before = store.get_chunks(job_id)
    assert not store.file_result(cid, "msgbatch_1", ResultType.SUCCEEDED, answer="dup", usage=USAGE)
    assert not store.file_result(cid, "msgbatch_1", ResultType.ERRORED, retry=True)

    assert store.get_chunks(job_id) == before
    [filed] = before
    assert (filed.status, filed.answer, filed.batch_id) == (ChunkStatus.SUCCEEDED, '{"a":1}', "msgbatch_1")
    assert (filed.output_tokens, filed.cache_read_tokens, filed.cache_creation_tokens) == (200, 30, 4)
    with pytest.raises(ValueError):
        store.file_result(cid, "msgbatch_1", ResultType.SUCCEEDED)


def test_errored_results_retry_within_the_budget(store: SqlStateStore, job_id: int) -> None:
    cid = f"job_{job_id}_batch_0"
    store.save_chunks(job_id, [chunk(job_id, 0)])
    statuses = []
    for attempt in range(3):
        submit(store, job_id, [0], f"msgbatch_{attempt}")
        assert store.file_result(
            cid,
            f"msgbatch_{attempt}",
            ResultType.EXPIRED,
            retry=True,
            max_attempts=3,
            error_message="expired",
        )
        [current] = store.get_chunks(job_id)
        statuses.append((current.status, current.attempts))

    assert statuses == [(ChunkStatus.RETRY, 1), (ChunkStatus.RETRY, 2), (ChunkStatus.FAILED, 3)]
    assert store.mark_chunks_submitted([cid], "msgbatch_9") == 0  # failed chunks are not resubmitted
    [failed] = store.get_chunks(job_id)
    assert (failed.error_class, failed.error_message) == ("expired", "expired")


def test_a_permanent_error_fails_the_chunk_at_once(store: SqlStateStore, job_id: int) -> None:
    store.save_chunks(job_id, [chunk(job_id, 0)])
    submit(store, job_id, [0], "msgbatch_1")
    assert store.file_result(
        f"job_{job_id}_batch_0",
        "msgbatch_1",
        ResultType.ERRORED,
        error_class="invalid_request_error",
        error_message="bad image",
        retry=False,
    )
    [failed] = store.get_chunks(job_id)
    assert (failed.status, failed.attempts) == (ChunkStatus.FAILED, 1)
    assert (failed.error_class, failed.error_message) == ("invalid_request_error", "bad image")


def test_counts_and_usage_totals(store: SqlStateStore, job_id: int) -> None:
    other = register(store, 2)[0].id
    store.save_chunks(job_id, [chunk(job_id, n) for n in range(3)])
    store.save_chunks(other, [chunk(other, 0)])
    submit(store, job_id, [0, 1], "b1")
    submit(store, other, [0], "b1")
    for cid in (f"job_{job_id}_batch_0", f"job_{other}_batch_0"):
        store.file_result(cid, "b1", ResultType.SUCCEEDED, answer="{}", usage=USAGE)

    counts = store.chunk_counts()
    assert counts[job_id][ChunkStatus.SUCCEEDED] == 1 and counts[job_id][ChunkStatus.SUBMITTED] == 1
    assert counts[job_id][ChunkStatus.PREPARED] == 1 and counts[job_id][ChunkStatus.FAILED] == 0
    assert set(store.chunk_counts([other])) == {other}
    assert store.usage_totals(job_id) == USAGE
    assert store.usage_totals() == Usage(2000, 400, 60, 8)
    assert store.usage_totals(12345) == Usage()


def test_resaving_a_failed_chunk_starts_it_over(store: SqlStateStore, job_id: int) -> None:
    store.save_chunks(job_id, [chunk(job_id, 0)])
    submit(store, job_id, [0], "b1")
    store.file_result(f"job_{job_id}_batch_0", "b1", ResultType.ERRORED, retry=False)
    store.save_chunks(job_id, [chunk(job_id, 0)])
    [again] = store.get_chunks(job_id)
    assert again == chunk(job_id, 0)


def test_rotations_found_while_preparing_round_trip(store: SqlStateStore, job_id: int) -> None:
    from dataclasses import replace

    record = replace(chunk(job_id, 0), rotations={1: 90, 2: 0, 8: 270})
    store.save_chunks(job_id, [record])
    assert store.get_chunks(job_id)[0].rotations == {1: 90, 2: 0, 8: 270}


def test_release_returns_submitted_chunks_without_counting_a_try(store: SqlStateStore, job_id: int) -> None:
    store.save_chunks(job_id, [chunk(job_id, n) for n in range(3)])
    submit(store, job_id, [0, 1, 2], "sync")
    assert store.release_chunks("sync", [f"job_{job_id}_batch_1"]) == 1
    assert store.release_chunks("other-batch") == 0
    assert store.release_chunks("sync") == 2
    chunks = store.get_chunks(job_id)
    assert {c.status for c in chunks} == {ChunkStatus.PREPARED}
    assert {c.attempts for c in chunks} == {0}
    assert {c.batch_id for c in chunks} == {None}


def test_request_totals_keep_the_mode_each_request_was_sent_with(store: SqlStateStore, job_id: int) -> None:
    other = register(store, 2)[0].id
    store.save_chunks(job_id, [chunk(job_id, 0), chunk(job_id, 1)])
    marked = [replace(chunk(other, 0), emulated=True), replace(chunk(other, 1), reused_from="x")]
    store.save_chunks(other, marked)
    submit(store, job_id, [0], "msgbatch_1")
    submit(store, job_id, [1], "sync")
    submit(store, other, [0], "msgbatch_1")
    for cid, batch in ((f"job_{job_id}_batch_0", "msgbatch_1"), (f"job_{job_id}_batch_1", "sync")):
        store.file_result(cid, batch, ResultType.SUCCEEDED, answer="{}", usage=USAGE)
    store.file_result(f"job_{other}_batch_0", "msgbatch_1", ResultType.SUCCEEDED, answer="{}", usage=USAGE)

    totals = store.request_totals()
    assert totals.usage_by_mode == {"batch": Usage(2000, 400, 60, 8), "sync": USAGE}
    assert (totals.requests, totals.emulated, totals.reused) == (4, 1, 1)
    assert [c.sent_mode for c in store.get_chunks(job_id)] == ["batch", "sync"]
    mine = store.request_totals([job_id])
    assert mine.usage_by_mode == {"batch": USAGE, "sync": USAGE} and mine.emulated == 0
    by_job = store.request_totals_by_job([job_id, other, other + 1])
    assert by_job == {
        job_id: mine,
        other: store.request_totals([other]),
        other + 1: store.request_totals([other + 1]),
    }


def test_prepared_chunks_of_several_jobs_and_their_jobs_are_recorded_together(store: SqlStateStore) -> None:
    (a, _), (b, _), (c, _) = (register(store, n) for n in (1, 2, 3))
    claim = {"from_statuses": [JobStatus.PENDING], "to_status": JobStatus.PREPARING, "lease_seconds": 60}
    leases = store.claim_jobs(worker_id="w", limit=3, **claim)  # type: ignore[arg-type]
    store.transition(c.id, [JobStatus.PREPARING], JobStatus.CANCELED)  # its lease is gone

    held = store.record_prepared([chunk(a.id, 0), chunk(b.id, 0), chunk(b.id, 1)], leases[:1] + leases[2:])

    assert [lease.job_id for lease in held] == [a.id]
    assert [x.n for x in store.get_chunks(a.id)] == [0] and [x.n for x in store.get_chunks(b.id)] == [0, 1]
    statuses = store.job_statuses([a.id, b.id, c.id])
    assert statuses == {a.id: JobStatus.PREPARED, b.id: JobStatus.PREPARING, c.id: JobStatus.CANCELED}
    assert store.get_job(a.id).attempts == 0


def test_chunk_progress_counts_a_jobs_chunks_by_batch(store: SqlStateStore, job_id: int) -> None:
    other = register(store, 2)[0].id
    store.save_chunks(job_id, [chunk(job_id, n) for n in range(4)])
    submit(store, job_id, [0, 1], "b1")
    submit(store, job_id, [2], "b2")
    store.file_result(f"job_{job_id}_batch_0", "b1", ResultType.SUCCEEDED, answer="{}", usage=USAGE)

    progress = store.chunk_progress([job_id, other])
    assert set(progress) == {job_id}, "a job without chunks has no progress yet"
    mine = progress[job_id]
    assert (mine.total, mine.succeeded, dict(mine.in_flight)) == (4, 1, {"b1": 1, "b2": 1})
    assert mine.percent({"b1": 0.5, "b2": 1.0}) == 62.5  # (1 + 0.5 + 1) of 4
    assert mine.percent({}, answered=1) == 50.0
