"""The one bounded retry loop: backoff with jitter, a limit in tries or in time, the clock injected.

Every loop that tries again (object store calls, Claude calls, outages, batch polls, result reads)
is ``retrying`` with its own backoff and limit, so tests pass a fake ``sleep``/``monotonic`` and
take no real time. A transient error's ``retry_after`` wins over the backoff when it is longer.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

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


def retrying(
    fn: Callable[[], T],
    *,
    backoff: Backoff,
    attempts: int | None = None,
    budget: float | None = None,
    to_the_end: bool = False,
    retry_on: type[BaseException] | tuple[type[BaseException], ...] = TransientError,
    retry_if: Callable[[Any], bool] | None = None,
    on_retry: Callable[[Any, int, float], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> T:
    """``fn()``, tried again after a ``retry_on`` error (that ``retry_if`` accepts, when given) until
    ``attempts`` tries or ``budget`` seconds are spent; then the last error is raised as it was.

    The budget counts from the first try and a wait that would pass it is not begun, unless
    ``to_the_end``: then the last wait is cut to end at the budget, where one more try is made.
    ``on_retry(error, attempt, waited)`` is called before each wait (to log, or to note the error).
    """
    delays = backoff.delays()
    start = monotonic()
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except retry_on as exc:
            if retry_if is not None and not retry_if(exc):
                raise
            waited = monotonic() - start
            delay = max(next(delays), getattr(exc, "retry_after", None) or 0.0)
            if attempts is not None and attempt >= attempts:
                raise
            if budget is not None:
                left = budget - waited
                if (left <= 0) if to_the_end else (delay > left):
                    raise
                delay = min(delay, left)
            if on_retry is not None:
                on_retry(exc, attempt, waited)
            sleep(delay)


def retry_call(
    fn: Callable[[], T],
    *,
    attempts: int,
    backoff: Backoff,
    sleep: Callable[[float], None] = time.sleep,
    what: str = "call",
) -> T:
    """Call ``fn`` until it succeeds; retry TransientError up to ``attempts`` tries in all, then raise
    AttemptsExhausted (permanent)."""
    try:
        return retrying(fn, backoff=backoff, attempts=attempts, sleep=sleep)
    except TransientError as exc:
        raise AttemptsExhausted(f"{what} failed {attempts} times: {exc}") from exc
