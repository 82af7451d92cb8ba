"""Typed calls to the coordinator actor, so the driver's arguments are checked like any call.

Each method sends without waiting and returns the call's ref; a dead actor raises Ray's actor
error when the call is made or when its ref is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from raybatch.models import ProcessingMode


class Offerable(Protocol):
    """A prepared job as the driver holds it (``raybatch.loops.scheduler.ReadyJob``)."""

    @property
    def job_id(self) -> int: ...
    @property
    def mode(self) -> ProcessingMode: ...
    @property
    def payloads(self) -> Mapping[int, Any]: ...
    @property
    def request_bytes(self) -> int: ...


class CoordinatorHandle:
    """The driver's view of a Ray handle to ``raybatch.shells.runtime.CoordinatorActor``."""

    def __init__(self, actor: Any) -> None:
        self._actor = actor

    def offer_all(self, jobs: Sequence[Offerable]) -> Any:
        """Hand over prepared jobs' chunks, in one call (see ``BatchCoordinator.offer``): a step
        that finished several jobs costs one actor call, not one each."""
        offers = [(job.job_id, dict(job.payloads), job.mode, job.request_bytes) for job in jobs]
        return self._actor.offer_all.remote(offers)

    def forget(self, job_ids: Sequence[int]) -> Any:
        """Drop the payloads of jobs that no longer need them."""
        return self._actor.forget.remote(list(job_ids))

    def flush(self, flush: bool = True) -> Any:
        """Say whether more work is coming soon."""
        return self._actor.flush.remote(flush)

    def snapshot(self, settled: int = -1, wait: float = 0.0) -> Any:
        """The ref of a ``CoordinatorSnapshot``, taken once more than ``settled`` passes settled
        answered jobs, or after ``wait`` seconds."""
        return self._actor.snapshot.remote(settled, wait)
