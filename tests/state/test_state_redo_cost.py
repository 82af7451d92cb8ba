"""A redo's cost is counted beside the first answer's: in the usage and request totals and in the
spend since a time (the caps), on each backend; an answer taken from the cache adds nothing."""

from __future__ import annotations

from dataclasses import replace

from clock import START, FakeClock
from state_helpers import chunk, register

from raybatch.cost import add_usage
from raybatch.models import ChunkStatus, JobStatus, ProcessingMode, ResultType, Usage
from raybatch.state import SqlStateStore

FIRST = Usage(input_tokens=1000, output_tokens=200, cache_read_tokens=30, cache_creation_tokens=4)
REDONE = Usage(input_tokens=700, output_tokens=90)
TWICE = add_usage([FIRST, FIRST])
BATCH, SYNC = ProcessingMode.BATCH, ProcessingMode.SYNC


def answer(store: SqlStateStore, job: int, ns: list[int], batch: str, usage: Usage) -> None:
    """Send chunks ``ns`` in ``batch`` (sync when it says so) and file their answers."""
    mode = SYNC if batch == "sync" else BATCH
    store.record_sent({f"job_{job}_batch_{n}": (mode, 0.25) for n in ns})
    assert store.mark_chunks_submitted([f"job_{job}_batch_{n}" for n in ns], batch) == len(ns)
    for n in ns:
        assert store.file_result(
            f"job_{job}_batch_{n}", batch, ResultType.SUCCEEDED, answer="{}", usage=usage
        )


def completed_job(store: SqlStateStore) -> int:
    """A job whose two chunks were answered in a batch, each bringing ``FIRST``."""
    job = register(store, 1)[0].id
    store.save_chunks(job, [chunk(job, 0), chunk(job, 1)])
    answer(store, job, [0, 1], "msgbatch_1", FIRST)
    assert store.transition(job, [JobStatus.PENDING], JobStatus.COMPLETED)
    return job


def test_a_fresh_redo_adds_its_answer_to_every_total(store: SqlStateStore, clock: FakeClock) -> None:
    job = completed_job(store)
    clock.advance(86_400)
    today = clock()
    assert store.redo_job(job, [0], fresh=True)
    assert store.usage_totals(job) == TWICE, "the cleared answer stays counted"

    store.save_chunks(job, [chunk(job, 0)])  # prepared again
    store.record_sent({f"job_{job}_batch_0": (SYNC, 0.25)})
    store.mark_chunks_submitted([f"job_{job}_batch_0"], "sync")
    assert store.spend_since(START) == (0.25, {BATCH: TWICE}), "in flight: both counted"
    store.file_result(f"job_{job}_batch_0", "sync", ResultType.SUCCEEDED, answer="{}", usage=REDONE)

    assert store.usage_totals(job) == store.usage_totals() == add_usage([FIRST, FIRST, REDONE])
    totals = store.request_totals([job])
    assert totals.usage_by_mode == {BATCH: TWICE, SYNC: REDONE} and totals.requests == 3
    assert store.spend_since(START) == (0.0, {BATCH: TWICE, SYNC: REDONE})
    assert store.spend_since(today) == (0.0, {SYNC: REDONE}), "the day counts what was sent in it"


def test_a_redo_answered_from_the_cache_costs_nothing_more(store: SqlStateStore) -> None:
    job = completed_job(store)
    assert store.redo_job(job, [1])
    cached = replace(chunk(job, 1), status=ChunkStatus.SUCCEEDED, answer="{}", reused_from="job_9_batch_1")
    store.save_chunks(job, [cached])  # what preparation files for an answer already held

    totals = store.request_totals([job])
    assert store.usage_totals(job) == TWICE and totals.usage_by_mode == {BATCH: TWICE}
    assert (totals.requests, totals.reused) == (3, 1)
    assert store.spend_since(START) == (0.0, {BATCH: TWICE})


def test_a_redo_twice_keeps_each_answer(store: SqlStateStore) -> None:
    job = completed_job(store)
    for usage in (REDONE, FIRST):
        assert store.redo_job(job, [0, 1], fresh=True)
        store.save_chunks(job, [chunk(job, 0), chunk(job, 1)])
        answer(store, job, [0, 1], "msgbatch_2" if usage is REDONE else "msgbatch_3", usage)
        assert store.transition(job, [JobStatus.PENDING], JobStatus.COMPLETED)
    assert store.usage_totals(job) == add_usage([FIRST] * 4 + [REDONE] * 2)
    assert store.request_totals().requests == 6


def test_an_answer_cut_short_or_unparseable_is_counted_beside_the_one_kept(store: SqlStateStore) -> None:
    job = register(store, 1)[0].id
    store.save_chunks(job, [chunk(job, 0)])
    cid = f"job_{job}_batch_0"
    store.record_sent({cid: (BATCH, 0.25)})
    store.mark_chunks_submitted([cid], "msgbatch_1")
    cut = Usage(input_tokens=1000, output_tokens=4096)  # stopped at max_tokens: paid, asked again
    assert store.file_result(cid, "msgbatch_1", ResultType.ERRORED, usage=cut, retry=True, max_attempts=3)
    assert store.usage_totals(job) == cut
    store.mark_chunks_submitted([cid], "msgbatch_2")
    assert store.file_result(cid, "msgbatch_2", ResultType.SUCCEEDED, answer="{}", usage=FIRST)
    assert store.usage_totals(job) == add_usage([cut, FIRST])
    assert store.request_totals([job]).requests == 2
    assert not store.file_result(cid, "msgbatch_2", ResultType.ERRORED, usage=cut, retry=True)  # filed once
    assert store.usage_totals(job) == add_usage([cut, FIRST])


def test_a_chunk_prepared_again_under_a_new_processing_key_keeps_its_first_answer_counted(
    store: SqlStateStore,
) -> None:
    job = completed_job(store)  # chunks 0 and 1 answered under v1
    store.save_chunks(job, [chunk(job, 0), chunk(job, 1)])  # the same key: the answers stand
    assert store.usage_totals(job) == TWICE
    store.save_chunks(job, [chunk(job, 0, key="v2"), chunk(job, 1)])  # another prompt for chunk 0
    assert store.get_chunks(job)[0].status is ChunkStatus.PREPARED
    assert store.usage_totals(job) == TWICE, "the replaced answer stays counted"
    answer(store, job, [0], "msgbatch_2", REDONE)
    assert store.usage_totals(job) == add_usage([FIRST, FIRST, REDONE])


def test_an_emulated_answer_replaced_under_a_real_key_is_not_counted(store: SqlStateStore) -> None:
    job = register(store, 1)[0].id
    store.save_chunks(job, [replace(chunk(job, 0), emulated=True)])
    answer(store, job, [0], "msgbatch_1", FIRST)  # the built-in emulator's stand-in answer
    store.save_chunks(job, [chunk(job, 0, key="v2")])  # a key now: asked for real
    assert store.usage_totals(job) == Usage()
    assert store.request_totals([job]).emulated == 0
