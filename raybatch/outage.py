"""Waiting out an outage of the state database or the object store.

``patient(port, ...)`` wraps a StateStore or an ObjectStore: a call that fails with the outage's
transient error is tried again with backoff and jitter until it succeeds or the time budget
(DATABASE_OUTAGE_BUDGET, STORE_OUTAGE_BUDGET) is spent; then the last error is raised as it was, and
the caller parks the work as for any transient error. While it waits, a warning says so now and then.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

from raybatch.errors import DatabaseUnavailable, StorageUnavailable, TransientError
from raybatch.retry import Backoff, retrying

log = logging.getLogger(__name__)

OUTAGE_BACKOFF = Backoff(initial=0.5, factor=2.0, cap=10.0, jitter=0.3)
SAY_EVERY_SECONDS = 15.0  # a waiting line at most this often

T = TypeVar("T")


class Patience:
    """Retries one kind of transient error within a time budget; shared by every call of one port."""

    def __init__(
        self,
        what: str,
        error: type[TransientError],
        budget: float,
        *,
        backoff: Backoff = OUTAGE_BACKOFF,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what, self.error, self.budget = what, error, budget
        self._backoff, self._sleep, self._monotonic = backoff, sleep, monotonic
        self._outage = Outage(monotonic)

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()``, waiting out this port's outage for at most the budget (from the first failure)."""
        start = self._monotonic()
        try:
            result = retrying(
                fn,
                backoff=self._backoff,
                budget=self.budget,
                retry_on=self.error,
                on_retry=lambda exc, _, waited: self._say(exc, waited),
                sleep=self._sleep,
                monotonic=self._monotonic,
            )
        except self.error as exc:
            waited = self._monotonic() - start
            log.error("%s still unavailable after %.0f s; giving up: %s", self.what, waited, exc)
            raise
        self._recovered()
        return result

    def _say(self, exc: Exception, waited: float) -> None:
        down = self._outage.failing(waited)
        if down is not None:
            budget = self.budget
            log.warning(
                "%s unavailable for %.0f s (%s); waiting for it, up to %.0f s per call",
                self.what,
                down,
                exc,
                budget,
            )

    def _recovered(self) -> None:
        down = self._outage.over()
        if down is not None:
            log.warning("%s is back after %.0f s", self.what, down)


class Outage:
    """How long something has been failing, told at most every SAY_EVERY_SECONDS and once when it
    ends: the caller says it, in its own words. Shared by the threads of one process."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._since: float | None = None  # when the current outage was first met
        self._said = -1e9

    def failing(self, waited: float = 0.0) -> float | None:
        """A failure (``waited`` seconds into it): the outage's length when a line is due, else None."""
        now = self._monotonic()
        with self._lock:
            if self._since is None:
                self._since = now - waited
            if now - self._said < SAY_EVERY_SECONDS:
                return None
            self._said = now
            return now - self._since

    def over(self) -> float | None:
        """A success: the outage's length if one just ended, else None."""
        if self._since is None:
            return None
        with self._lock:
            if self._since is None:
                return None
            down, self._since, self._said = self._monotonic() - self._since, None, -1e9
        return down


class _Patient:
    """Every method of ``target`` called through ``patience``; an iterator is read whole inside the
    call (a listing cut by the outage is read again)."""

    def __init__(self, target: Any, patience: Patience) -> None:
        self._target = target
        self._patience = patience

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_target", "_patience"):
            raise AttributeError(name)
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            def once() -> Any:
                result = attr(*args, **kwargs)
                return iter(list(result)) if isinstance(result, Iterator) else result

            return self._patience.call(once)

        return call

    def __repr__(self) -> str:
        return repr(self._target)


P = TypeVar("P")


def patient_state(state: P, budget: float, **options: Any) -> P:
    """``state`` (a StateStore) waiting out database outages for ``budget`` seconds per call."""
    return cast(P, _Patient(state, Patience("state database", DatabaseUnavailable, budget, **options)))


def patient_store(store: P, budget: float, **options: Any) -> P:
    """``store`` (an ObjectStore) waiting out storage outages for ``budget`` seconds per call."""
    return cast(P, _Patient(store, Patience("object store", StorageUnavailable, budget, **options)))
