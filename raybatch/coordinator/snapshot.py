"""What the coordinator tells a driver at each look (its own module: a driver unpickles it without
loading the coordinator and the Claude SDK behind it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CoordinatorSnapshot:
    """What the driver asks each tick: the backlog it must not outrun, and what is in flight."""

    offered_jobs: int
    pending_bytes: int
    active_batches: int
    sync_in_flight: int
    paused: bool
    parked: bool
    running: bool
    stopped: str | None = None  # why no work can be sent at all (credentials rejected)
    settled: int = 0  # passes that settled answered jobs so far: a driver waits for the next one
