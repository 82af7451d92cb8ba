"""Waiting out an outage of the database or the store: retried with backoff within the budget, said
in the log, and given up (the error as it was) past the budget."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from clock import FakeClock

from raybatch.errors import DatabaseUnavailable, InvalidRequest, StorageUnavailable
from raybatch.outage import patient_state, patient_store


class Flaky:
    """Fails with ``error`` until ``down_until`` on the clock."""

    def __init__(self, clock: FakeClock, error: Exception, down_until: float) -> None:
        self.clock, self.error, self.down_until, self.calls = clock, error, down_until, 0
        self.name = "flaky"

    def get(self, key: str) -> str:
        self.calls += 1
        if self.clock.monotonic() < self.down_until:
            raise self.error
        return f"value of {key}"

    def list(self, prefix: str) -> Iterator[str]:
        yield f"{prefix}a"
        if self.clock.monotonic() < self.down_until:
            raise self.error  # a listing cut half-way
        yield f"{prefix}b"

    def refuse(self) -> None:
        raise InvalidRequest("never")


def test_an_outage_shorter_than_the_budget_is_waited_out(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    target = Flaky(clock, DatabaseUnavailable("connection refused"), down_until=45.0)
    state = patient_state(target, 60.0, sleep=clock.sleep, monotonic=clock.monotonic)
    with caplog.at_level(logging.WARNING):
        assert state.get("k") == "value of k"
    assert clock.monotonic() >= 45.0 and target.calls > 3, "retried with backoff until it answered"
    waiting = [r.getMessage() for r in caplog.records if "waiting for it" in r.getMessage()]
    assert waiting and "state database unavailable" in waiting[0] and "connection refused" in waiting[0]
    assert len(waiting) <= 45 / 15 + 1, "a waiting line now and then, not one per try"
    assert any("is back after" in r.getMessage() for r in caplog.records)
    assert state.name == "flaky", "plain attributes pass through"


def test_past_the_budget_the_error_is_raised_as_it_was() -> None:
    clock = FakeClock()
    target = Flaky(clock, StorageUnavailable("503"), down_until=1e9)
    store = patient_store(target, 60.0, sleep=clock.sleep, monotonic=clock.monotonic)
    with pytest.raises(StorageUnavailable):
        store.get("k")
    assert 30.0 <= clock.monotonic() <= 60.0


def test_other_errors_are_not_retried_and_listings_are_read_whole() -> None:
    clock = FakeClock()
    target = Flaky(clock, StorageUnavailable("reset"), down_until=5.0)
    store = patient_store(target, 60.0, sleep=clock.sleep, monotonic=clock.monotonic)
    assert list(store.list("p/")) == ["p/a", "p/b"], "a listing cut by the outage is read again"
    with pytest.raises(InvalidRequest):
        store.refuse()
    db_down = patient_store(Flaky(clock, DatabaseUnavailable("x"), down_until=1e9), 60.0)
    with pytest.raises(DatabaseUnavailable):  # a store waits for the store only
        db_down.get("k")
