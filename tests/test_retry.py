"""The one retry loop: a limit in tries or in time, retry-after honoured, no real time taken."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from raybatch.claude.emulator import ManualClock
from raybatch.errors import AttemptsExhausted, InvalidRequest, RateLimited, StorageUnavailable
from raybatch.retry import Backoff, retry_call, retrying

STEADY = Backoff(initial=1.0, factor=2.0, cap=4.0)


def failing(times: int, error: Exception) -> tuple[list[int], Callable[[], str]]:
    calls: list[int] = []

    def fn() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return "done"

    return calls, fn


def test_tries_until_it_succeeds_with_the_backoff_between() -> None:
    clock = ManualClock()
    calls, fn = failing(3, StorageUnavailable("down"))
    assert retrying(fn, backoff=STEADY, attempts=5, sleep=clock.sleep, monotonic=clock) == "done"
    assert len(calls) == 4 and clock.sleeps == [1.0, 2.0, 4.0]


def test_past_its_attempts_the_last_error_is_raised_as_it_was() -> None:
    clock = ManualClock()
    calls, fn = failing(10, StorageUnavailable("down"))
    with pytest.raises(StorageUnavailable):
        retrying(fn, backoff=STEADY, attempts=3, sleep=clock.sleep)
    assert len(calls) == 3 and clock.sleeps == [1.0, 2.0]


def test_retry_call_ends_in_attempts_exhausted() -> None:
    calls, fn = failing(10, StorageUnavailable("down"))
    with pytest.raises(AttemptsExhausted):
        retry_call(fn, attempts=2, backoff=STEADY, sleep=lambda _: None)
    assert len(calls) == 2


def test_other_errors_are_not_retried() -> None:
    clock = ManualClock()
    calls, fn = failing(1, InvalidRequest("bad"))
    with pytest.raises(InvalidRequest):
        retrying(fn, backoff=STEADY, attempts=5, sleep=clock.sleep)
    assert len(calls) == 1 and clock.sleeps == []


def test_retry_after_wins_over_a_shorter_backoff() -> None:
    clock = ManualClock()
    _, fn = failing(1, RateLimited("slow down", retry_after=30.0))
    retrying(fn, backoff=STEADY, attempts=3, sleep=clock.sleep)
    assert clock.sleeps == [30.0]


def test_a_budget_does_not_begin_a_wait_that_would_pass_it() -> None:
    clock = ManualClock()
    calls, fn = failing(100, StorageUnavailable("down"))
    with pytest.raises(StorageUnavailable):
        retrying(fn, backoff=STEADY, budget=10.0, sleep=clock.sleep, monotonic=clock)
    assert clock.sleeps == [1.0, 2.0, 4.0] and len(calls) == 4  # a fourth wait (4 s) would pass 10 s


def test_to_the_end_cuts_the_last_wait_and_tries_once_more_at_the_budget() -> None:
    clock = ManualClock()
    calls, fn = failing(100, StorageUnavailable("down"))
    with pytest.raises(StorageUnavailable):
        retrying(fn, backoff=STEADY, budget=10.0, to_the_end=True, sleep=clock.sleep, monotonic=clock)
    assert clock.sleeps == [1.0, 2.0, 4.0, 3.0] and len(calls) == 5 and clock() == 10.0


def test_on_retry_hears_each_failure_that_is_tried_again() -> None:
    heard: list[tuple[int, float]] = []
    clock = ManualClock()
    _, fn = failing(2, StorageUnavailable("down"))
    retrying(
        fn,
        backoff=STEADY,
        attempts=5,
        on_retry=lambda exc, attempt, waited: heard.append((attempt, waited)),
        sleep=clock.sleep,
        monotonic=clock,
    )
    assert heard == [(1, 0.0), (2, 1.0)]


def test_retry_if_narrows_which_errors_are_tried_again() -> None:
    clock = ManualClock()
    calls, fn = failing(5, StorageUnavailable("down for good"))
    with pytest.raises(StorageUnavailable):
        retrying(
            fn, backoff=STEADY, attempts=5, retry_if=lambda exc: "a while" in str(exc), sleep=clock.sleep
        )
    assert len(calls) == 1 and clock.sleeps == []
