"""Urgent offers in a burst: synchronous calls wait on threads of their own, so the coordinator's
beat (its lease) and its database work never queue behind them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest
from builders import bundle_texts, claude_settings, offer, prepared_job
from clock import FakeClock

from raybatch.claude.records import PreparedRequest
from raybatch.claude.sync_client import SyncOutcome
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.state import SqlStateStore


class HeldCalls:
    """Synchronous sends that block until released, as calls to a slow API do."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = 0
        self._lock = threading.Lock()

    def send(self, requests: Sequence[PreparedRequest], **_: object) -> SyncOutcome:
        with self._lock:
            self.started += 1
        self.release.wait(30)
        return SyncOutcome([], [r.custom_id for r in requests])  # never sent: back to prepared


class CountedBeats:
    """The state store, counting the coordinator's beats."""

    def __init__(self, inner: SqlStateStore) -> None:
        self._inner, self.beats = inner, 0

    def beat(self, *args: object) -> bool:
        self.beats += 1
        return self._inner.beat(*args)

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


@pytest.mark.anyio
async def test_a_burst_of_urgent_calls_never_starves_the_beat(state: SqlStateStore) -> None:
    jobs = [prepared_job(state, bundle_texts(0)[:8], name=f"u{n}", mode="sync") for n in range(12)]
    calls, counted, clock = HeldCalls(), CountedBeats(state), FakeClock()
    settings = claude_settings("http://127.0.0.1:9", sync_concurrency=4, coordinator_lease_seconds=3)
    coord = BatchCoordinator(
        settings,
        counted,
        messages=calls,
        autostart=False,
        monotonic=clock.monotonic,  # type: ignore[arg-type]
    )
    try:
        for job in jobs:  # each urgent offer is sent at once, by a call of its own
            await offer(coord, job, mode="sync")
            await coord.step()
        for _ in range(100):  # every offer's call under way, each holding a thread
            if calls.started == 12:
                break
            await asyncio.sleep(0.02)
        assert calls.started == 12
        before = counted.beats
        clock.advance(2.0)  # a beat is due
        await asyncio.wait_for(coord._recovery.recover(), 10.0)
        assert counted.beats == before + 1
        assert await asyncio.wait_for(coord.snapshot(), 10.0), "database work goes on meanwhile"
    finally:
        calls.release.set()
        await coord.stop()
