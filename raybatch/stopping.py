"""Stopping a run on request: SIGTERM or a first Ctrl-C asks the driver to drain (take no more
work, let the writes under way end within DRAIN_SECONDS, hand back the rest at once) and end; a
second Ctrl-C interrupts at once. Before the driver takes work and after it ended (connecting,
compacting the documents table) there is nothing to drain: a signal interrupts at once, and the
run's ``finally`` blocks give back what it holds (its workload units, a compaction's lease)."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from types import FrameType

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """Whether a stop was asked for (call it); set by the signal handlers of ``stop_on_signals``."""

    def __init__(self, *, drain: bool = True) -> None:
        self._asked = threading.Event()
        self._drains = drain  # False: a signal raises KeyboardInterrupt (nothing to drain now)
        self.signal: int | None = None

    def __call__(self) -> bool:
        return self._asked.is_set()

    def ask(self, signum: int, frame: FrameType | None = None) -> None:
        """A signal's handler: the first asks for a drain; a second Ctrl-C, or any signal while
        there is nothing to drain, interrupts."""
        if not self._drains or (self._asked.is_set() and signum == signal.SIGINT):
            raise KeyboardInterrupt
        self.signal = signum
        self._asked.set()
        log.warning(
            "%s: the run drains and stops (Ctrl-C again to stop at once)", signal.Signals(signum).name
        )

    @contextlib.contextmanager
    def draining(self) -> Iterator[None]:
        """Inside, a signal asks for a drain (the driver's loop); outside, it interrupts."""
        self._drains = True
        try:
            yield
        finally:
            self._drains = False


@contextlib.contextmanager
def stop_on_signals(*, drain: bool = True) -> Iterator[StopRequest]:
    """SIGTERM and SIGINT ask ``StopRequest`` for a drain while inside (``drain=False``: only
    within its ``draining()``, else they interrupt); the previous handlers come back after. Outside
    the main thread (where no handler can be set) a stop is never asked."""
    request = StopRequest(drain=drain)
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {signum: signal.getsignal(signum) for signum in SIGNALS}
    for signum in SIGNALS:
        signal.signal(signum, request.ask)
    try:
        yield request
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
