"""What the coordinator's sweep and a rerun ask of the state store, on SQLite and PostgreSQL."""

from __future__ import annotations

from state_helpers import chunk, register

from raybatch.models import BatchStatus, ChunkStatus, JobStatus, ResultType
from raybatch.state import SqlStateStore


def prepared_job(store: SqlStateStore, n: int, chunks: int = 2) -> int:
    job = register(store, n)[0].id
    store.save_chunks(job, [chunk(job, i) for i in range(chunks)])
    store.transition(job, [JobStatus.PENDING], JobStatus.PREPARED)
    return job


def test_chunks_of_batches_no_longer_in_flight_are_released(store: SqlStateStore) -> None:
    live, ended, sync = prepared_job(store, 1), prepared_job(store, 2), prepared_job(store, 3)
    for job, batch in ((live, "msgbatch_live"), (ended, "msgbatch_ended")):
        intent = store.record_batch_intent([f"job_{job}_batch_0", f"job_{job}_batch_1"], 10)
        store.attach_batch(intent, batch, BatchStatus.IN_PROGRESS, "{}")
    store.update_batch("msgbatch_ended", BatchStatus.ENDED, {}, "{}")  # ... before its results were filed
    store.mark_chunks_submitted([f"job_{sync}_batch_0"], "sync")

    assert store.submitted_chunk_ids("sync") == [f"job_{sync}_batch_0"]
    assert store.release_stranded_chunks(["sync"]) == 2
    assert {c.status for c in store.get_chunks(live)} == {ChunkStatus.SUBMITTED}
    assert {c.status for c in store.get_chunks(ended)} == {ChunkStatus.RETRY}
    assert store.get_chunks(sync)[0].status is ChunkStatus.SUBMITTED
    assert {c.attempts for c in store.get_chunks(ended)} == {0}


def test_jobs_whose_status_lags_their_chunks_are_found(store: SqlStateStore) -> None:
    waiting, lagging, done, in_flight = (prepared_job(store, n) for n in (1, 2, 3, 4))
    for job in (lagging, done, in_flight):
        store.mark_chunks_submitted([f"job_{job}_batch_0", f"job_{job}_batch_1"], "msgbatch_x")
        store.transition(job, [JobStatus.PREPARED], JobStatus.SUBMITTED)
    store.release_chunks("msgbatch_x", [f"job_{lagging}_batch_0"])
    for n in (0, 1):
        store.file_result(f"job_{done}_batch_{n}", "msgbatch_x", ResultType.SUCCEEDED, answer="{}")
    store.transition(waiting, [JobStatus.PREPARED], JobStatus.PREPARED)

    assert store.unsettled_jobs() == [done]  # lagging still has a chunk in flight
    store.release_chunks("msgbatch_x", [f"job_{lagging}_batch_1"])
    assert store.unsettled_jobs() == [lagging, done]


def test_chunks_held_by_an_intent_are_known_until_it_is_settled(store: SqlStateStore) -> None:
    job = prepared_job(store, 1)
    intent = store.record_batch_intent([f"job_{job}_batch_0"], 10)
    assert store.intent_chunk_ids() == {f"job_{job}_batch_0"}
    store.mark_batch_lost(intent)
    assert store.intent_chunk_ids() == set()


def test_a_failed_job_is_reopened_with_its_answers(store: SqlStateStore) -> None:
    job = prepared_job(store, 1)
    store.mark_chunks_submitted([f"job_{job}_batch_0"], "msgbatch_y")
    store.file_result(f"job_{job}_batch_0", "msgbatch_y", ResultType.SUCCEEDED, answer="{}")
    store.fail_job(job, "claude", "InvalidRequest", "rejected")
    assert register(store, 1)[0].status is JobStatus.FAILED, "a lasting reason stays failed on a rerun"

    assert store.reopen_job(job)
    assert not store.reopen_job(job), "only a failed job"
    reopened = store.get_job(job)
    assert (reopened.status, reopened.error_class, reopened.attempts) == (JobStatus.PENDING, None, 0)
    assert store.get_chunks(job)[0].status is ChunkStatus.SUCCEEDED

    store.fail_job(job, "claude", "expired", "chunk 1: expired")
    assert register(store, 1)[0].status is JobStatus.PENDING, "a passing reason is taken up by a rerun"
