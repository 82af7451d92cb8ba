"""The one fake clock of the tests: time moves only when the test says so.

The emulator keeps its own ``ManualClock`` (seconds only, a part of the product); everything else a
test hands a clock to takes this one.
"""

from __future__ import annotations

import multiprocessing
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any

START = datetime(2030, 1, 1, tzinfo=UTC)
FORK = multiprocessing.get_context("fork")  # children inherit the shared clock and barriers


class FakeClock:
    """Call it for the time as a UTC datetime (the stores' ``now``); ``monotonic`` gives the seconds
    since ``start`` (the loops' clock). ``advance`` moves it; ``sleep`` records the wait in
    ``sleeps`` and moves it by that. With ``shared=True`` the time lives in shared memory, so
    processes forked from the test see it move; otherwise the clock pickles."""

    def __init__(self, start: datetime = START, *, shared: bool = False) -> None:
        self._start = start
        self._seconds: Any = FORK.Value("d", 0.0) if shared else _Seconds()
        self.sleeps: list[float] = []

    def __call__(self) -> datetime:
        return self._start + timedelta(seconds=self._seconds.value)

    def monotonic(self) -> float:
        return float(self._seconds.value)

    def advance(self, seconds: float) -> None:
        with self._seconds.get_lock():
            self._seconds.value += seconds

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)


class _Seconds:
    """The unshared clock's time: a float with the shared value's interface."""

    def __init__(self) -> None:
        self.value = 0.0

    def get_lock(self) -> AbstractContextManager[None]:
        return nullcontext()
