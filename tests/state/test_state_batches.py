"""Batches: the intent recorded before create, attach, progress, end, and loss."""

from __future__ import annotations

import pytest
from clock import FakeClock
from state_helpers import chunk, register

from raybatch.errors import IntentConflict, PermanentError
from raybatch.models import BatchStatus, ChunkStatus, ResultType
from raybatch.state import SqlStateStore


@pytest.fixture
def job_id(store: SqlStateStore) -> int:
    job_id = register(store, 1)[0].id
    store.save_chunks(job_id, [chunk(job_id, n) for n in range(3)])
    return job_id


def ids(job_id: int, *ns: int) -> list[str]:
    return [f"job_{job_id}_batch_{n}" for n in ns]


def test_an_intent_is_active_and_names_its_requests_before_the_batch_exists(
    store: SqlStateStore, job_id: int
) -> None:
    intent = store.record_batch_intent(ids(job_id, 2, 0, 1, 0), request_bytes=9000)

    [active] = store.active_batches()
    assert (active.id, active.anthropic_id, active.status) == (intent, None, BatchStatus.CREATING)
    assert (active.request_count, active.request_bytes, active.active) == (3, 9000, True)
    assert store.batch_chunks(intent) == sorted(ids(job_id, 0, 1, 2))
    assert {c.status for c in store.get_chunks(job_id)} == {ChunkStatus.PREPARED}  # not sent yet


def test_attach_marks_the_chunks_submitted_and_update_ends_the_batch(
    store: SqlStateStore, job_id: int, clock: FakeClock
) -> None:
    intent = store.record_batch_intent(ids(job_id, 0, 1), request_bytes=10)
    store.attach_batch(intent, "msgbatch_A", BatchStatus.IN_PROGRESS, raw='{"id": "msgbatch_A"}')
    store.attach_batch(intent, "msgbatch_A", BatchStatus.IN_PROGRESS, raw="{}")  # a retried call
    with pytest.raises(PermanentError):
        store.attach_batch(intent, "msgbatch_B", BatchStatus.IN_PROGRESS, raw="{}")

    chunks = store.get_chunks(job_id)
    assert [(c.status, c.batch_id) for c in chunks] == [
        (ChunkStatus.SUBMITTED, "msgbatch_A"),
        (ChunkStatus.SUBMITTED, "msgbatch_A"),
        (ChunkStatus.PREPARED, None),
    ]
    counts = {"processing": 1, "succeeded": 1, "errored": 0, "canceled": 0, "expired": 0}
    assert store.update_batch("msgbatch_A", BatchStatus.IN_PROGRESS, counts, raw="{}")
    assert store.get_batch(intent).counts == counts and store.get_batch(intent).ended_at is None
    clock.advance(60)
    assert store.update_batch("msgbatch_A", BatchStatus.ENDED, {**counts, "processing": 0}, raw="{}")
    assert not store.update_batch("msgbatch_unknown", BatchStatus.ENDED, counts, raw="{}")

    ended = store.get_batch(intent)
    assert (ended.status, ended.anthropic_id, ended.ended_at) == (BatchStatus.ENDED, "msgbatch_A", clock())
    assert store.active_batches() == []


def test_a_lost_intent_leaves_its_chunks_ready_to_submit_again(store: SqlStateStore, job_id: int) -> None:
    intent = store.record_batch_intent(ids(job_id, 0, 1), request_bytes=10)
    assert store.mark_batch_lost(intent) == 0
    assert store.get_batch(intent).status is BatchStatus.LOST and store.active_batches() == []
    assert store.mark_chunks_submitted(ids(job_id, 0, 1), "msgbatch_next") == 2


def test_a_lost_batch_sends_its_unanswered_chunks_to_retry(store: SqlStateStore, job_id: int) -> None:
    intent = store.record_batch_intent(ids(job_id, 0, 1), request_bytes=10)
    store.attach_batch(intent, "msgbatch_A", BatchStatus.IN_PROGRESS, raw="{}")
    store.file_result(ids(job_id, 0)[0], "msgbatch_A", ResultType.SUCCEEDED, answer="{}")

    assert store.mark_batch_lost(intent) == 1

    assert [c.status for c in store.get_chunks(job_id)] == [
        ChunkStatus.SUCCEEDED,
        ChunkStatus.RETRY,
        ChunkStatus.PREPARED,
    ]
    assert not store.file_result(ids(job_id, 1)[0], "msgbatch_A", ResultType.SUCCEEDED, answer="late")


def test_unknown_batches(store: SqlStateStore) -> None:
    with pytest.raises(KeyError):
        store.get_batch(404)
    with pytest.raises(PermanentError):
        store.attach_batch(404, "msgbatch_A", BatchStatus.IN_PROGRESS, raw="{}")
    assert store.batch_chunks(404) == []
    assert store.mark_batch_lost(404) == 0


def test_batch_jobs_and_known_ids(store: SqlStateStore) -> None:
    from state_helpers import chunk, register

    jobs = [register(store, i)[0].id for i in (11, 12)]
    for job in jobs:
        store.save_chunks(job, [chunk(job, 0), chunk(job, 1)])
    intent = store.record_batch_intent([f"job_{j}_batch_0" for j in jobs], 10)
    assert store.batch_jobs(intent) == sorted(jobs)
    assert store.known_batch_ids() == set()
    store.attach_batch(intent, "msgbatch_known", BatchStatus.IN_PROGRESS, "{}")
    assert store.known_batch_ids() == {"msgbatch_known"}


def test_two_creating_intents_never_hold_one_request(store: SqlStateStore, job_id: int) -> None:
    first = store.record_batch_intent(ids(job_id, 0, 1), request_bytes=10)
    with pytest.raises(IntentConflict):
        store.record_batch_intent(ids(job_id, 1, 2), request_bytes=10)  # 1 is held by the first
    assert [b.id for b in store.active_batches()] == [first]
    store.attach_batch(first, "msgbatch_A", BatchStatus.IN_PROGRESS, raw="{}")
    with pytest.raises(IntentConflict):  # in a batch now: not waiting to be sent
        store.record_batch_intent(ids(job_id, 0), request_bytes=10)
    store.mark_batch_lost(first)  # its requests go again, in a new intent
    again = store.record_batch_intent(ids(job_id, 0, 1, 2), request_bytes=10)
    assert store.batch_chunks(again) == sorted(ids(job_id, 0, 1, 2))


def test_an_attach_of_requests_in_another_batch_fails_loudly(store: SqlStateStore, job_id: int) -> None:
    intent = store.record_batch_intent(ids(job_id, 0), request_bytes=10)
    store.mark_chunks_submitted(ids(job_id, 0), "msgbatch_other")  # sent elsewhere meanwhile
    with pytest.raises(IntentConflict):
        store.attach_batch(intent, "msgbatch_A", BatchStatus.IN_PROGRESS, raw="{}")
    assert store.get_batch(intent).anthropic_id is None, "nothing recorded"


def test_an_adopted_batch_yields_to_the_intent_that_created_it(store: SqlStateStore, job_id: int) -> None:
    creator = store.record_batch_intent(ids(job_id, 0), request_bytes=10)
    adopter = store.record_batch_intent(ids(job_id, 1), request_bytes=10)
    # The adopter found the creator's batch by listing before the creator recorded it ...
    assert store.attach_batch(adopter, "msgbatch_A", BatchStatus.IN_PROGRESS, raw="{}", adopted=True)
    # ... the creator's own record takes it back: the adopter is reconciled again.
    assert store.attach_batch(creator, "msgbatch_A", BatchStatus.IN_PROGRESS, raw="{}")
    assert store.get_batch(adopter).status is BatchStatus.CREATING
    assert store.get_batch(adopter).anthropic_id is None
    chunks = {c.n: (c.status, c.batch_id) for c in store.get_chunks(job_id)}
    assert chunks[0] == (ChunkStatus.SUBMITTED, "msgbatch_A")
    assert chunks[1] == (ChunkStatus.PREPARED, None)
    assert ids(job_id, 1)[0] in store.intent_chunk_ids()
    # A later adoption of a batch another intent holds is refused, nothing changed.
    assert not store.attach_batch(adopter, "msgbatch_A", BatchStatus.IN_PROGRESS, raw="{}", adopted=True)
    assert store.get_batch(adopter).status is BatchStatus.CREATING
