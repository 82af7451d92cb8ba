"""A clock that moves only when told: the emulator's processing clock in tests and demos."""

from __future__ import annotations

import threading


class ManualClock:
    """Call it for the time; ``advance`` (or ``sleep``, for code that waits) moves it forward."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self.sleeps: list[float] = []  # every ``sleep`` asked for, in order

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds``."""
        with self._lock:
            self._now += max(0.0, seconds)

    def sleep(self, seconds: float) -> None:
        """Record the wait and move the clock by it, at once."""
        with self._lock:
            self.sleeps.append(seconds)
            self._now += max(0.0, seconds)
