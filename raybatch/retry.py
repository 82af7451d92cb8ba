"""Backoff with jitter and a bounded retry loop; the clock is injected so tests take no real time."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from raybatch.errors import AttemptsExhausted, TransientError

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """Delays ``initial``, ×``factor`` each time, capped at ``cap``; ``jitter`` spreads each by ±share."""

    initial: float = 1.0
    factor: float = 1.5
    cap: float = 10.0
    jitter: float = 0.0

    def delays(self, rng: random.Random | None = None) -> Iterator[float]:
        """An endless sequence of delays."""
        rng = rng or random.Random()
        delay = self.initial
        while True:
            spread = delay * self.jitter
            yield max(0.0, delay + rng.uniform(-spread, spread)) if spread else delay
            delay = min(self.cap, delay * self.factor)


def retry_call(
    fn: Callable[[], T],
    *,
    attempts: int,
    backoff: Backoff,
    sleep: Callable[[float], None] = time.sleep,
    what: str = "call",
) -> T:
    """Call ``fn`` until it succeeds; retry TransientError up to ``attempts`` tries in all.

    A transient error's ``retry_after`` wins over the backoff when it is longer.
    """
    delays = backoff.delays()
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except TransientError as exc:
            if attempt == attempts:
                raise AttemptsExhausted(f"{what} failed {attempts} times: {exc}") from exc
            delay = next(delays)
            sleep(max(delay, exc.retry_after or 0.0))
    raise AssertionError("unreachable")
