"""Jobs: registration deduplicated by content, conditional transitions, failure and progress."""

from __future__ import annotations

import pytest
from clock import FORK
from state_helpers import register, sha

from raybatch.models import JobStatus
from raybatch.state import SqlStateStore


def test_same_content_is_the_same_job(store: SqlStateStore) -> None:
    first, created = register(store, 1, source_name="a.pdf")
    again, created_again = register(store, 1, source_name="renamed.pdf")
    other, created_other = register(store, 2)

    assert (created, created_again, created_other) == (True, False, True)
    assert again == first
    assert again.source_name == "a.pdf"  # the name is metadata, not identity
    assert other.id != first.id
    assert first.status is JobStatus.PENDING and first.attempts == 0
    assert [job.id for job in store.list_jobs()] == [first.id, other.id]


def test_forced_registration_makes_a_new_job_that_later_registrations_find(store: SqlStateStore) -> None:
    first, _ = register(store, 1)
    forced, created = register(store, 1, force=True)
    again, created_again = register(store, 1)

    assert created and forced.id != first.id and forced.sha256 == first.sha256 == sha(1)
    assert not created_again and again.id == forced.id  # the newest job for that content
    assert len(store.list_jobs()) == 2


def _register_racer(url: str, barrier, results) -> None:  # type: ignore[no-untyped-def]
    racer = SqlStateStore.from_url(url)
    barrier.wait()
    job, created = register(racer, 7)
    results.put((job.id, created))
    racer.close()


def test_concurrent_registration_of_one_file_from_processes_makes_one_job(
    store: SqlStateStore, db_url: str
) -> None:
    racers = 5
    barrier, results = FORK.Barrier(racers), FORK.Queue()
    processes = [FORK.Process(target=_register_racer, args=(db_url, barrier, results)) for _ in range(racers)]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0

    assert len({job_id for job_id, _ in outcomes}) == 1
    assert sum(created for _, created in outcomes) == 1
    assert len(store.list_jobs()) == 1


def test_transitions_are_conditional(store: SqlStateStore) -> None:
    job, _ = register(store, 1)

    assert store.transition(job.id, [JobStatus.PENDING], JobStatus.PREPARING, pages=12)
    assert not store.transition(job.id, [JobStatus.PENDING], JobStatus.PREPARING)
    assert not store.transition(job.id, [JobStatus.PREPARED], JobStatus.SUBMITTED)
    assert not store.transition(9999, [JobStatus.PENDING], JobStatus.PREPARING)

    moved = store.get_job(job.id)
    assert moved.status is JobStatus.PREPARING and moved.pages == 12
    assert moved.updated_at is not None and moved.created_at is not None


def test_transition_rejects_unknown_fields(store: SqlStateStore) -> None:
    job, _ = register(store, 1)
    with pytest.raises(TypeError, match="lease_token"):
        store.transition(job.id, [JobStatus.PENDING], JobStatus.PREPARING, lease_token=99)
    assert store.get_job(job.id).status is JobStatus.PENDING


def test_lookups_and_counts(store: SqlStateStore) -> None:
    jobs = [register(store, n)[0] for n in range(4)]
    store.transition(jobs[1].id, [JobStatus.PENDING], JobStatus.PREPARING)
    store.transition(jobs[2].id, [JobStatus.PENDING], JobStatus.CANCELED)

    with pytest.raises(KeyError):
        store.get_job(12345)
    assert [j.id for j in store.list_jobs([JobStatus.PENDING])] == [jobs[0].id, jobs[3].id]
    counts = store.count_jobs()
    assert counts[JobStatus.PENDING] == 2 and counts[JobStatus.PREPARING] == 1
    assert counts[JobStatus.CANCELED] == 1 and counts[JobStatus.COMPLETED] == 0
    assert set(counts) == set(JobStatus)


def test_fail_job_records_the_reason_once(store: SqlStateStore) -> None:
    job, _ = register(store, 1)
    store.transition(job.id, [JobStatus.PENDING], JobStatus.PREPARING)

    assert store.fail_job(job.id, "prepare", "InvalidSource", "encrypted PDF")
    assert not store.fail_job(job.id, "prepare", "InvalidSource", "again")

    failed = store.get_job(job.id)
    assert failed.status is JobStatus.FAILED
    assert (failed.error_class, failed.error_message) == ("InvalidSource", "encrypted PDF")
    [error] = store.list_errors(job.id)
    assert (error.phase, error.error_class, error.message) == ("prepare", "InvalidSource", "encrypted PDF")


def test_long_error_messages_are_clipped(store: SqlStateStore) -> None:
    job, _ = register(store, 1)
    store.fail_job(job.id, "write", "BatchFailed", "x" * 10_000)
    assert len(store.get_job(job.id).error_message or "") == 2000
    assert len(store.list_errors(job.id)[0].message) == 2000


def test_progress(store: SqlStateStore) -> None:
    a, _ = register(store, 1)
    b, _ = register(store, 2)
    store.set_progress({a.id: 0.25, b.id: 1.0})
    store.set_progress({})
    assert (store.get_job(a.id).progress, store.get_job(b.id).progress) == (0.25, 1.0)
