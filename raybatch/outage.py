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
        self._lock = threading.Lock()
        self._down_since: float | None = None  # when the current outage was first met
        self._said = -1e9

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
        now = self._monotonic()
        with self._lock:
            if self._down_since is None:
                self._down_since = now - waited
            if now - self._said < SAY_EVERY_SECONDS:
                return
            self._said = now
            down = now - self._down_since
        log.warning(
            "%s unavailable for %.0f s (%s); waiting for it, up to %.0f s per call",
            self.what,
            down,
            exc,
            self.budget,
        )

    def _recovered(self) -> None:
        if self._down_since is None:
            return
        with self._lock:
            if self._down_since is None:
                return
            down, self._down_since, self._said = self._monotonic() - self._down_since, None, -1e9
        log.warning("%s is back after %.0f s", self.what, down)


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
