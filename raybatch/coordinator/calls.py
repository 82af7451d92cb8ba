"""Typed calls to the coordinator actor, so the driver's arguments are checked like any call.

Each method sends without waiting and returns the call's ref; a dead actor raises Ray's actor
error when the call is made or when its ref is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from raybatch.models import ProcessingMode


class CoordinatorHandle:
    """The driver's view of a Ray handle to ``raybatch.shells.runtime.CoordinatorActor``."""

    def __init__(self, actor: Any) -> None:
        self._actor = actor

    def offer(self, job_id: int, chunks: Mapping[int, Any], mode: ProcessingMode, request_bytes: int) -> Any:
        """Hand over a job's prepared chunks (see ``BatchCoordinator.offer``)."""
        return self._actor.offer.remote(job_id, dict(chunks), mode, request_bytes)

    def forget(self, job_ids: Sequence[int]) -> Any:
        """Drop the payloads of jobs that no longer need them."""
        return self._actor.forget.remote(list(job_ids))

    def flush(self, flush: bool = True) -> Any:
        """Say whether more work is coming soon."""
        return self._actor.flush.remote(flush)

    def snapshot(self) -> Any:
        """The ref of a ``CoordinatorSnapshot``."""
        return self._actor.snapshot.remote()
