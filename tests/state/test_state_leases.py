"""Leases: exactly one owner per lease across processes, expiry, and fencing of stale owners."""

from __future__ import annotations

from datetime import timedelta

import pytest
from clock import FORK, FakeClock
from state_helpers import register

from raybatch.errors import LeaseLost
from raybatch.models import JobStatus, Lease
from raybatch.state import SqlStateStore

PENDING, PREPARING, PREPARED = JobStatus.PENDING, JobStatus.PREPARING, JobStatus.PREPARED


def claim(store: SqlStateStore, worker: str, limit: int = 10, **kwargs) -> list[Lease]:  # type: ignore[no-untyped-def]
    return store.claim_jobs(
        worker_id=worker,
        from_statuses=[PENDING],
        to_status=PREPARING,
        lease_seconds=kwargs.pop("lease_seconds", 60),
        limit=limit,
        **kwargs,
    )


def test_claim_takes_jobs_in_order_and_counts_attempts(store: SqlStateStore, clock: FakeClock) -> None:
    jobs = [register(store, n)[0] for n in range(5)]

    first = claim(store, "w1", limit=2)
    second = claim(store, "w2", limit=10)

    assert [lease.job_id for lease in first] == [jobs[0].id, jobs[1].id]
    assert [lease.job_id for lease in second] == [j.id for j in jobs[2:]]
    assert all(lease.token == 1 and lease.attempt == 1 for lease in first + second)
    assert first[0].expires_at == clock() + timedelta(seconds=60)
    assert claim(store, "w3") == []  # all held
    held = store.get_job(jobs[0].id)
    assert held.status is PREPARING and held.attempts == 1


def test_claim_can_be_limited_to_some_jobs(store: SqlStateStore) -> None:
    jobs = [register(store, n)[0] for n in range(4)]
    leases = claim(store, "w", job_ids=[jobs[3].id, jobs[1].id])
    assert sorted(lease.job_id for lease in leases) == [jobs[1].id, jobs[3].id]
    assert claim(store, "w", limit=0) == []


def test_an_expired_lease_is_reclaimed_with_a_higher_token(store: SqlStateStore, clock: FakeClock) -> None:
    job, _ = register(store, 1)
    [old] = claim(store, "w1", lease_seconds=30)

    clock.advance(29)
    assert claim(store, "w2") == []
    clock.advance(2)
    [new] = claim(store, "w2")

    assert (new.job_id, new.worker_id, new.token, new.attempt) == (job.id, "w2", 2, 2)
    assert old.token < new.token
    assert store.get_job(job.id).attempts == 2


def test_renew_keeps_the_job_held(store: SqlStateStore, clock: FakeClock) -> None:
    register(store, 1)
    [lease] = claim(store, "w1", lease_seconds=30)
    clock.advance(20)
    renewed = store.renew_lease(lease, 30)
    clock.advance(20)  # past the first expiry, within the renewed one

    assert renewed.expires_at > lease.expires_at and renewed.token == lease.token
    assert claim(store, "w2") == []
    store.finish_claim(renewed, PREPARED, pages=3, attempts=0)
    done = store.get_job(lease.job_id)
    assert (done.status, done.pages, done.attempts) == (PREPARED, 3, 0)


def test_a_finished_claim_cannot_be_finished_or_renewed_again(store: SqlStateStore) -> None:
    register(store, 1)
    [lease] = claim(store, "w1")
    store.finish_claim(lease, PREPARED)
    with pytest.raises(LeaseLost):
        store.finish_claim(lease, JobStatus.COMPLETED)
    with pytest.raises(LeaseLost):
        store.renew_lease(lease, 60)
    assert store.get_job(lease.job_id).status is PREPARED


def test_a_transition_ends_the_lease_so_a_canceled_job_is_not_completed(store: SqlStateStore) -> None:
    register(store, 1)
    [lease] = claim(store, "w1")
    assert store.transition(lease.job_id, [PENDING, PREPARING], JobStatus.CANCELED)
    with pytest.raises(LeaseLost):
        store.renew_lease(lease, 60)
    with pytest.raises(LeaseLost):
        store.finish_claim(lease, PREPARED)
    assert store.get_job(lease.job_id).status is JobStatus.CANCELED


def test_fail_job_under_a_lease_is_fenced(store: SqlStateStore, clock: FakeClock) -> None:
    register(store, 1)
    [old] = claim(store, "w1", lease_seconds=10)
    clock.advance(11)
    [new] = claim(store, "w2")

    with pytest.raises(LeaseLost):
        store.fail_job(old.job_id, "prepare", "InvalidSource", "late", lease=old)
    assert store.get_job(old.job_id).status is PREPARING
    assert store.list_errors(old.job_id) == []
    assert store.fail_job(new.job_id, "prepare", "InvalidSource", "bad", lease=new)
    assert store.get_job(new.job_id).status is JobStatus.FAILED


def test_a_transition_under_a_lease_is_fenced(store: SqlStateStore, clock: FakeClock) -> None:
    register(store, 1)
    [old] = claim(store, "w1", lease_seconds=10)
    clock.advance(11)
    [new] = claim(store, "w2")

    assert not store.transition(old.job_id, [PREPARING], PENDING, lease=old, attempts=0)
    assert store.get_job(new.job_id).attempts == new.attempt
    assert store.holds(new)
    assert store.transition(new.job_id, [PREPARING], PENDING, lease=new)
    assert store.get_job(new.job_id).status is PENDING


def _claimer(url: str, clock: FakeClock, worker: str, barrier, results) -> None:  # type: ignore[no-untyped-def]
    state = SqlStateStore.from_url(url, now=clock)
    barrier.wait()
    claimed = []
    while leases := claim(state, worker, limit=3, lease_seconds=300):
        claimed.extend((lease.job_id, lease.token) for lease in leases)
    results.put((worker, claimed))
    state.close()


def _claim_in_processes(url: str, clock: FakeClock, workers: int) -> list[tuple[int, int]]:
    barrier, results = FORK.Barrier(workers), FORK.Queue()
    processes = [
        FORK.Process(target=_claimer, args=(url, clock, f"w{i}", barrier, results)) for i in range(workers)
    ]
    for process in processes:
        process.start()
    claimed = [item for _ in processes for item in results.get(timeout=60)[1]]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    return claimed


def test_processes_claiming_at_once_take_every_job_exactly_once_per_lease(db_url: str) -> None:
    clock = FakeClock(shared=True)
    store = SqlStateStore.from_url(db_url, now=clock)
    store.migrate()
    jobs = {register(store, n)[0].id for n in range(40)}

    first = _claim_in_processes(db_url, clock, workers=4)
    assert sorted(job for job, _ in first) == sorted(jobs)  # every job once, none twice
    assert {token for _, token in first} == {1}

    clock.advance(301)  # every lease expired: the next round reclaims each job once more
    second = _claim_in_processes(db_url, clock, workers=4)
    assert sorted(job for job, _ in second) == sorted(jobs)
    assert {token for _, token in second} == {2}
    assert {job.attempts for job in store.list_jobs()} == {2}
    store.close()


def _sleepy_worker(url: str, clock: FakeClock, claimed, wake, outcome) -> None:  # type: ignore[no-untyped-def]
    state = SqlStateStore.from_url(url, now=clock)
    [lease] = claim(state, "sleepy", lease_seconds=30)
    claimed.put(lease.token)
    wake.wait(60)  # the worker stalls (GC pause, lost network) while its lease runs out
    results = []
    for attempt in (lambda: state.renew_lease(lease, 30), lambda: state.finish_claim(lease, PREPARED)):
        try:
            attempt()
            results.append("accepted")
        except LeaseLost:
            results.append("LeaseLost")
    outcome.put(results)
    state.close()


def test_a_paused_worker_that_wakes_late_is_refused_and_the_new_owner_is_accepted(db_url: str) -> None:
    clock = FakeClock(shared=True)
    store = SqlStateStore.from_url(db_url, now=clock)
    store.migrate()
    job, _ = register(store, 1)
    claimed, wake, outcome = FORK.Queue(), FORK.Event(), FORK.Queue()
    sleepy = FORK.Process(target=_sleepy_worker, args=(db_url, clock, claimed, wake, outcome))
    sleepy.start()
    assert claimed.get(timeout=60) == 1

    clock.advance(31)
    [lease] = claim(store, "awake")
    wake.set()
    late = outcome.get(timeout=60)
    sleepy.join(timeout=60)

    assert late == ["LeaseLost", "LeaseLost"]
    assert lease.token == 2
    store.finish_claim(lease, PREPARED)
    assert store.get_job(job.id).status is PREPARED
    store.close()


def test_many_claims_are_checked_and_finished_together_and_a_lost_one_is_left_as_it_is(
    store: SqlStateStore,
) -> None:
    for n in (1, 2, 3):
        register(store, n)
    first, second, third = claim(store, "w1")
    assert store.transition(second.job_id, [PREPARING], JobStatus.CANCELED)  # ends its lease
    assert store.holding([first, second, third]) == {first.job_id, third.job_id}
    assert store.holding([]) == set()

    moved = store.finish_claims([first, second, third], PREPARED, pages=2, progress=50.0)
    assert moved == {first.job_id, third.job_id}
    statuses = {
        j.id: (j.status, j.pages) for j in store.get_jobs([first.job_id, second.job_id, third.job_id])
    }
    assert statuses == {
        first.job_id: (PREPARED, 2),
        second.job_id: (JobStatus.CANCELED, None),
        third.job_id: (PREPARED, 2),
    }
    assert store.finish_claims([first], JobStatus.COMPLETED) == set(), "a finished claim holds no more"
    assert store.holding([first]) == set()
