"""Waiting for a Message Batch to end: polls back off from 1 s, ×1.5, up to the poll interval.

Two different ways not to get an ended batch: ``WaitTimedOut`` (transient: the deadline passed, the
batch may still end) and ``BatchFailed`` (permanent: the API does not know the batch, past the grace
period after its creation, so it is lost). A 404 within the grace period is the API not showing a
fresh batch yet, and is polled again.

A batch that ended with nothing succeeded (every request errored, expired or canceled) is returned
like any other ended batch: its results say what happened to each request, and filing them sends
each one back for another try. ``ended_without_success`` tells the caller to log it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from raybatch.claude.records import BatchState
from raybatch.errors import BatchFailed, ResourceNotFound, TransientError, WaitTimedOut
from raybatch.models import BatchStatus
from raybatch.retry import Backoff, retrying

log = logging.getLogger(__name__)

NOT_FOUND_GRACE = 60.0  # seconds after create during which a 404 is the API catching up


class BatchReader(Protocol):
    """What the poller needs of a batch client."""

    def retrieve(self, batch_id: str) -> BatchState: ...


def poll_backoff(poll_interval: float) -> Backoff:
    """The delays between polls: 1 s, then ×1.5 each time, capped at ``poll_interval``."""
    return Backoff(initial=min(1.0, poll_interval), factor=1.5, cap=poll_interval)


def poll_once(
    client: BatchReader, batch_id: str, *, age: float, not_found_grace: float = NOT_FOUND_GRACE
) -> BatchState | None:
    """One look at a batch ``age`` seconds after its creation: its state, or None if not visible yet.

    Raises BatchFailed when the API does not know a batch older than ``not_found_grace`` (lost);
    other errors of the client pass through (transient ones are worth another poll).
    """
    try:
        return client.retrieve(batch_id)
    except ResourceNotFound as exc:
        if age < not_found_grace:
            log.info("batch %s not visible yet (%.0f s after create)", batch_id, age)
            return None
        raise BatchFailed(f"batch {batch_id} is unknown to the API {age:.0f} s after creation: lost") from exc


def wait_for_batch(
    client: BatchReader,
    batch_id: str,
    *,
    poll_interval: float,
    deadline: float,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
    not_found_grace: float = NOT_FOUND_GRACE,
    age_at_start: float = 0.0,
    on_poll: Callable[[BatchState], None] | None = None,
) -> BatchState:
    """Poll until the batch ends and return its state; WaitTimedOut after ``deadline`` seconds.

    ``age_at_start``: seconds since the batch was created (a reattached batch is older than its wait).
    Transient errors while polling are logged and polled through until the deadline.
    """
    start = monotonic()

    def once() -> BatchState:
        try:
            state = poll_once(
                client, batch_id, age=age_at_start + monotonic() - start, not_found_grace=not_found_grace
            )
        except TransientError as exc:
            log.warning("batch %s: poll failed, will poll again: %s", batch_id, exc)
            raise
        if state is not None and on_poll is not None:
            on_poll(state)
        if state is None or state.status is not BatchStatus.ENDED:
            raise _NotEnded(batch_id)
        return state

    try:
        return retrying(
            once,
            backoff=poll_backoff(poll_interval),
            budget=deadline,
            to_the_end=True,
            sleep=sleep,
            monotonic=monotonic,
        )
    except TransientError as exc:
        raise WaitTimedOut(f"batch {batch_id} had not ended after {deadline:.0f} s") from exc


class _NotEnded(TransientError):
    """The batch is still processing (or not visible yet): poll again."""


def ended_without_success(state: BatchState) -> bool:
    """True for an ended batch in which no request succeeded (all errored, expired or canceled)."""
    return state.status is BatchStatus.ENDED and state.counts.get("succeeded", 0) == 0
