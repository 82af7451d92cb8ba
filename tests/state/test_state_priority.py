"""Priorities: the unknown-value rule, urgent jobs claimed first, making a job urgent in each status."""

from __future__ import annotations

import logging

import pytest
from state_helpers import register

from raybatch.models import JobStatus, Lease, Priority, mode_for, priority_of
from raybatch.priority import make_urgent
from raybatch.state import SqlStateStore

PENDING, PREPARING, WRITING = JobStatus.PENDING, JobStatus.PREPARING, JobStatus.WRITING


@pytest.mark.parametrize(
    ("value", "expected", "warned"),
    [
        ("urgent", Priority.URGENT, False),
        (" URGENT ", Priority.URGENT, False),
        ("normal", Priority.NORMAL, False),
        ("high", Priority.NORMAL, True),
        ("", Priority.NORMAL, True),
        (None, Priority.NORMAL, True),
        (3, Priority.NORMAL, True),
    ],
)
def test_unknown_priorities_count_as_normal_with_a_warning(
    value: object, expected: Priority, warned: bool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="raybatch.models"):
        assert priority_of(value) is expected
    assert bool([r for r in caplog.records if "unknown priority" in r.message]) == warned


def test_urgent_jobs_are_sent_synchronously_whatever_the_default() -> None:
    assert mode_for(Priority.URGENT, "batch") == "sync"
    assert mode_for(Priority.NORMAL, "batch") == "batch"
    assert mode_for(Priority.NORMAL, "sync") == "sync"  # PROCESSING_MODE stays the default


def test_claims_take_urgent_jobs_first(store: SqlStateStore) -> None:
    normal = [register(store, n)[0].id for n in range(1, 4)]
    urgent = register(store, 9, priority=Priority.URGENT)[0]
    assert (urgent.priority, urgent.mode) == (Priority.URGENT, "batch")  # as the caller registered it
    assert [j.id for j in store.claimable_jobs([PENDING], PREPARING, limit=2)] == [urgent.id, normal[0]]
    only = store.claimable_jobs([PENDING], PREPARING, limit=5, priority=Priority.URGENT)
    assert [j.id for j in only] == [urgent.id]
    # Claims by id list (the driver's window) and without one both start with the urgent job.
    assert [lease.job_id for lease in claim(store, 1, job_ids=[normal[1], urgent.id])] == [urgent.id]
    store.set_priority([normal[2]], Priority.URGENT)
    assert [lease.job_id for lease in claim(store, 2)] == [normal[2], normal[0]]


def claim(store: SqlStateStore, limit: int, **kwargs: object) -> list[Lease]:
    return store.claim_jobs(
        worker_id="w", from_statuses=[PENDING], to_status=PREPARING, lease_seconds=60, limit=limit, **kwargs
    )


def test_an_urgent_registration_makes_the_existing_job_urgent(store: SqlStateStore) -> None:
    job, _ = register(store, 1, mode="batch")
    again, created = register(store, 1, mode="sync", priority=Priority.URGENT)
    assert not created and again.id == job.id
    assert (again.priority, again.mode) == (Priority.URGENT, "sync")


def _in_status(store: SqlStateStore, n: int, status: JobStatus) -> int:
    job = register(store, n)[0].id
    if status is PREPARING:
        claim(store, 1)
    elif status is JobStatus.FAILED:
        store.fail_job(job, "prepare", "Boom", "broken")
    elif status is not PENDING:
        store.transition(job, [PENDING], status)
    assert store.get_job(job).status is status
    return job


@pytest.mark.parametrize(
    ("status", "urgent", "mode", "says"),
    [
        (JobStatus.PENDING, True, "sync", "sent synchronously"),
        (JobStatus.PREPARING, True, "sync", "sent synchronously"),
        (JobStatus.PREPARED, True, "sync", "sent synchronously"),
        (JobStatus.SUBMITTED, True, "batch", "stays in"),
        (JobStatus.ANSWERED, True, "batch", "written ahead"),
        (JobStatus.WRITING, True, "batch", "written ahead"),
        (JobStatus.FAILED, True, "sync", "raybatch retry"),
        (JobStatus.COMPLETED, False, "batch", "already completed"),
        (JobStatus.CANCELED, False, "batch", "already canceled"),
    ],
)
def test_making_a_job_urgent_in_each_status(
    store: SqlStateStore, status: JobStatus, urgent: bool, mode: str, says: str
) -> None:
    job = _in_status(store, 1, status)
    [outcome] = make_urgent(store, [job])
    after = store.get_job(job)
    assert says in outcome.message and outcome.changed is urgent
    assert after.priority is (Priority.URGENT if urgent else Priority.NORMAL)
    assert (after.mode, after.status) == (mode, status)


def test_a_job_made_urgent_while_preparing_keeps_its_lease(store: SqlStateStore) -> None:
    register(store, 1)
    [lease] = claim(store, 1)
    make_urgent(store, [lease.job_id])
    store.renew_lease(lease, 60)  # the driver preparing it still holds it (LeaseLost otherwise)
    store.finish_claim(lease, JobStatus.PREPARED)
    assert store.get_job(lease.job_id).mode == "sync"


def test_pull_says_why_a_job_stays_in_its_batch(store: SqlStateStore) -> None:
    job = _in_status(store, 1, JobStatus.SUBMITTED)
    [outcome] = make_urgent(store, [job], pull=True)
    assert "cannot cancel single requests" in outcome.message


def test_totals_split_urgent_and_normal(store: SqlStateStore) -> None:
    register(store, 1)
    register(store, 2, priority=Priority.URGENT)
    store.transition(register(store, 3, priority=Priority.URGENT)[0].id, [PENDING], JobStatus.COMPLETED)
    totals = store.job_totals()
    assert totals.by_priority[Priority.URGENT][PENDING] == 1
    assert totals.by_priority[Priority.URGENT][JobStatus.COMPLETED] == 1
    assert totals.by_priority[Priority.NORMAL][PENDING] == 1
    assert totals.jobs == 3


def test_jobs_from_a_source_folder_or_file(store: SqlStateStore) -> None:
    inside = register(store, 1)[0].id  # file:///in/1.pdf
    register(store, 2, source_name="x")
    assert [j.id for j in store.jobs_from_source("file:///in/1.pdf")] == [inside]
    assert len(store.jobs_from_source("file:///in")) == 2
    assert store.jobs_from_source("file:///i") == []  # a folder, not a string prefix
