"""The workload budget's contract, on SQLite and PostgreSQL: the capacity holds across processes,
expired leases give their units back, renewal extends, giving back is idempotent."""

from __future__ import annotations

from datetime import timedelta

import pytest
from clock import FORK, FakeClock

from raybatch.state import SqlWorkloadStore

CAPACITY = 12
MINUTE = timedelta(seconds=60)


def take(store: SqlWorkloadStore, lease_id: str, units: int, ttl: float = 60, **kwargs):  # type: ignore[no-untyped-def]
    return store.take_units(
        lease_id=lease_id,
        holder=kwargs.pop("holder", lease_id),
        units=units,
        capacity=kwargs.pop("capacity", CAPACITY),
        ttl_seconds=ttl,
        **kwargs,
    )


def in_use(store: SqlWorkloadStore) -> int:
    return sum(lease.units for lease in store.live_leases())


def test_takes_fit_in_the_capacity_and_no_further(budget: SqlWorkloadStore, clock: FakeClock) -> None:
    run = take(budget, "run", 6, elastic=True)
    clock.advance(1)
    export = take(budget, "export", 3)
    assert run is not None and export is not None
    assert (run.units, run.elastic, run.taken_at, run.expires_at) == (
        6,
        True,
        clock() - timedelta(seconds=1),
        clock() + timedelta(seconds=59),
    )
    assert take(budget, "search", 4) is None  # 6 + 3 + 4 > 12
    assert take(budget, "small", 3) is not None  # exactly 12
    assert in_use(budget) == CAPACITY
    assert [lease.holder for lease in budget.live_leases()] == ["run", "export", "small"]


def test_taking_a_live_lease_again_returns_it(budget: SqlWorkloadStore) -> None:
    first = take(budget, "a", 10)
    assert take(budget, "a", 10) == first
    assert in_use(budget) == 10


def test_an_expired_lease_gives_its_units_back(budget: SqlWorkloadStore, clock: FakeClock) -> None:
    take(budget, "crashed", 12, ttl=60)
    clock.advance(59)
    assert take(budget, "next", 1) is None
    clock.advance(1)  # the lease ends at exactly taken + ttl
    assert budget.live_leases() == []
    assert take(budget, "next", 12) is not None
    assert budget.renew_units("crashed", 60) is None  # its units are someone else's now


def test_renewal_extends_and_may_lower_the_units(budget: SqlWorkloadStore, clock: FakeClock) -> None:
    lease = take(budget, "run", 6, ttl=60)
    assert lease is not None
    clock.advance(50)
    renewed = budget.renew_units("run", 60, units=5)
    assert renewed is not None
    assert (renewed.expires_at, renewed.units, renewed.taken_at) == (clock() + MINUTE, 5, lease.taken_at)
    clock.advance(50)  # past the first expiry, within the renewed one
    assert [lease.units for lease in budget.live_leases()] == [5]
    raised = budget.renew_units("run", 60, units=9)
    assert raised is not None and raised.units == 5  # renewal never raises the units
    assert take(budget, "other", 8) is None and take(budget, "other", 7) is not None


def test_giving_back_frees_the_units_and_is_idempotent(budget: SqlWorkloadStore) -> None:
    take(budget, "a", 12)
    budget.give_back_units("a")
    budget.give_back_units("a")
    budget.give_back_units("never-taken")
    assert budget.live_leases() == []
    assert budget.renew_units("a", 60) is None
    assert take(budget, "b", 12) is not None


def test_a_lease_takes_at_least_one_unit(budget: SqlWorkloadStore) -> None:
    with pytest.raises(ValueError):
        take(budget, "none", 0)


def _take_many(url: str, clock: FakeClock, worker: int, barrier, results) -> None:  # type: ignore[no-untyped-def]
    store = SqlWorkloadStore.from_url(url, now=clock)
    barrier.wait()
    for n in range(TAKES_EACH):
        if take(store, f"w{worker}-{n}", 1, capacity=CAPACITY) is not None:
            results.put(1)
    store.close()


PROCESSES, TAKES_EACH = 8, 4


def test_many_processes_taking_at_once_never_exceed_the_capacity(
    budget: SqlWorkloadStore, db_url: str, clock: FakeClock
) -> None:
    barrier = FORK.Barrier(PROCESSES)
    results = FORK.SimpleQueue()
    workers = [
        FORK.Process(target=_take_many, args=(db_url, clock, w, barrier, results)) for w in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    taken = 0
    while not results.empty():
        taken += results.get()
    assert PROCESSES * TAKES_EACH > CAPACITY
    assert taken == CAPACITY
    assert in_use(budget) == CAPACITY
