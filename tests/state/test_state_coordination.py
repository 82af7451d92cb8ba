"""Coordinators and drivers sharing one database, on each backend: one lead at a time, sync calls
released only once their coordinator stopped beating, prepared jobs held by their driver, and no
rows for a canceled job."""

from __future__ import annotations

import pytest
from clock import FakeClock
from state_helpers import sha

from raybatch.errors import LeaseLost
from raybatch.ids import custom_id
from raybatch.models import ChunkRecord, ChunkStatus, DocumentRecord, JobStatus, SourceKind, sync_tag
from raybatch.state import SqlStateStore


def job(store: SqlStateStore, n: int, status: JobStatus = JobStatus.PREPARED) -> int:
    record, _ = store.register_job(
        sha256=sha(n),
        source_uri=f"file:///{n}.pdf",
        source_name=f"{n}.pdf",
        kind=SourceKind.PDF,
        size_bytes=1,
    )
    store.transition(record.id, [JobStatus.PENDING], status)
    return record.id


def test_one_lead_at_a_time_and_it_passes_on(store: SqlStateStore, clock: FakeClock) -> None:
    assert store.beat("a", 30) is True
    assert store.beat("a", 30) is True  # renewed
    assert store.beat("b", 30) is False  # a holds it
    clock.advance(31)  # a went silent
    assert store.beat("b", 30) is True
    assert store.live_coordinators() == ["b"]
    store.retire("b")
    assert store.beat("a", 30) is True  # given up at once, no wait


def test_the_newest_live_coordinator_leads_and_an_older_one_gives_the_lead_up(
    store: SqlStateStore, clock: FakeClock
) -> None:
    """A run with other settings or code gets a coordinator of its own: the older one stops leading
    (no sweep, no poll of others' batches) at its next beat, the lead never goes back and forth, and
    a newer one that dies hands it back once its heartbeat lapses."""
    assert store.beat("old", 30) is True
    assert store.take_lease("compact.documents", "old", 60) is True
    clock.advance(1)
    assert store.beat("new", 30) is False  # old holds the lead until it sees the newer one
    assert store.beat("old", 30) is False  # it sees it: the lead is given up
    for _ in range(3):  # no going back and forth
        assert store.beat("new", 30) is True
        assert store.beat("old", 30) is False
        clock.advance(10)
    assert store.take_lease("compact.documents", "other", 60) is False  # other leases stay held
    assert store.beat("old", 30) is False
    clock.advance(21)  # new died 31 s ago: its heartbeat and lead lapsed
    assert store.beat("old", 30) is True
    assert store.live_coordinators() == ["old"]


def test_a_named_lease_has_one_holder_and_leaves_the_lead_alone(
    store: SqlStateStore, clock: FakeClock
) -> None:
    assert store.take_lease("compact.documents", "run-1", 60) is True
    assert store.take_lease("compact.documents", "run-2", 60) is False
    assert store.beat("a", 30) is True  # a different name: the lead is not the compaction's lease
    store.give_up_lease("compact.documents", "run-2")  # not its holder: nothing given up
    assert store.take_lease("compact.documents", "run-2", 60) is False
    store.give_up_lease("compact.documents", "run-1")
    assert store.take_lease("compact.documents", "run-2", 60) is True
    clock.advance(61)  # run-2 was killed mid-way: the lease ends by itself
    assert store.take_lease("compact.documents", "run-3", 60) is True
    assert store.take_lease("compact.documents", "run-2", 60) is False  # the late one cannot renew


def test_sync_calls_are_released_only_once_their_coordinator_stopped(
    store: SqlStateStore, clock: FakeClock
) -> None:
    job_id = job(store, 1)
    ids = [custom_id(job_id, n) for n in (0, 1)]
    records = [ChunkRecord(job_id, n, n + 1, n + 1, ids[n], "k", ChunkStatus.PREPARED) for n in (0, 1)]
    store.save_chunks(job_id, records)
    store.beat("a", 30)
    store.beat("b", 30)
    store.mark_chunks_submitted([ids[0]], sync_tag("a"))
    store.mark_chunks_submitted([ids[1]], sync_tag("b"))
    assert store.release_orphaned_sync_chunks() == 0  # both beat
    assert store.release_stranded_chunks(["sync"]) == 0  # not batches: left alone
    clock.advance(20)
    store.beat("a", 30)
    clock.advance(20)  # b silent for 40 s
    assert store.release_orphaned_sync_chunks() == 1
    chunks = {c.custom_id: c for c in store.get_chunks(job_id)}
    assert chunks[ids[1]].status is ChunkStatus.PREPARED
    assert chunks[ids[0]].status is ChunkStatus.SUBMITTED


def test_a_held_prepared_job_is_not_requeued(store: SqlStateStore, clock: FakeClock) -> None:
    held, left = job(store, 1), job(store, 2)
    assert store.hold_jobs("driver-a", [held, left], JobStatus.PREPARED, 60) == [held, left]
    assert store.hold_jobs("driver-b", [held], JobStatus.PREPARED, 60) == []  # a holds it
    clock.advance(61)
    assert store.hold_jobs("driver-a", [held], JobStatus.PREPARED, 60) == [held]  # a renews one
    assert store.requeue_unheld(held, JobStatus.PREPARED, 60) is False
    assert store.requeue_unheld(left, JobStatus.PREPARED, 60) is True  # its driver is gone
    assert store.get_job(left).status is JobStatus.PENDING


def test_a_job_just_prepared_waits_before_it_is_requeued(store: SqlStateStore, clock: FakeClock) -> None:
    fresh = job(store, 1)  # prepared now, not held yet: its driver holds it at its next renewal
    assert store.requeue_unheld(fresh, JobStatus.PREPARED, 60) is False
    clock.advance(61)
    assert store.requeue_unheld(fresh, JobStatus.PREPARED, 60) is True


def test_a_held_job_whose_holder_missed_a_renewal_is_not_taken_for_abandoned(
    store: SqlStateStore, clock: FakeClock
) -> None:
    """A hold moves ``updated_at``: a driver that renews late (its lease lapsed a moment) still
    holds its offered job for a whole lease, so another driver does not prepare it again."""
    held = job(store, 1)
    clock.advance(100)  # waiting for its batch, held all along
    assert store.hold_jobs("driver-a", [held], JobStatus.PREPARED, 60) == [held]
    clock.advance(61)  # the hold lapsed one second ago
    assert store.requeue_unheld(held, JobStatus.PREPARED, 120) is False
    assert store.hold_jobs("driver-a", [held], JobStatus.PREPARED, 60) == [held]  # renewed late
    clock.advance(121)  # its driver is gone for good
    assert store.requeue_unheld(held, JobStatus.PREPARED, 120) is True


def test_no_document_rows_for_a_canceled_job(store: SqlStateStore) -> None:
    job_id = job(store, 1, JobStatus.WRITING)
    doc = DocumentRecord(job_id=job_id, index=0, first_page=1, last_page=1, doc_type="invoice")
    store.upsert_documents(job_id, [doc])
    store.transition(job_id, [JobStatus.WRITING], JobStatus.CANCELED)
    with pytest.raises(LeaseLost):
        store.upsert_documents(job_id, [doc])
    assert store.delete_documents(job_id) == 1
    assert store.list_documents(job_id) == []


def test_a_batch_names_the_coordinator_that_recorded_it(store: SqlStateStore) -> None:
    """Its creator polls it while it beats (with its own settings and key); the lead polls the rest."""
    job_id = job(store, 1)
    ours = store.record_batch_intent([custom_id(job_id, 0)], 10, "coordinator-a")
    unknown = store.record_batch_intent([custom_id(job_id, 1)], 10)
    by_id = {b.id: b.created_by for b in store.active_batches()}
    assert by_id == {ours: "coordinator-a", unknown: None}
