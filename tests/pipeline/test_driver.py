"""The Driver without Ray: stand-ins for the prepare tasks, the writers and the coordinator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from driver_support import (
    CoordinatorState,
    StandInCoordinator,
    StandInTasks,
    StandInWriter,
    driver_parts,
    pending_job,
)
from ray.exceptions import ActorDiedError, RayActorError

from raybatch.actors.driver import Driver
from raybatch.models import JobStatus
from raybatch.settings import StateSettings
from raybatch.state import SqlStateStore, open_state


@pytest.fixture
def state(tmp_path: Path) -> SqlStateStore:
    return open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))


class Pauses:
    """The driver's sleep: records each pause; a run that would go on forever fails instead."""

    def __init__(self, pauses: list[float], limit: int = 500) -> None:
        self.pauses, self.limit = pauses, limit

    def __call__(self, seconds: float) -> None:
        self.pauses.append(seconds)
        assert len(self.pauses) < self.limit, "the run does not end"


class DiesAfterOffer(CoordinatorState):
    """A coordinator that keeps the first offer unanswered, then its process dies."""

    handle: StandInCoordinator

    def offer(self, job_id: int, chunks: dict[int, Any], mode: str, request_bytes: int) -> None:
        super().offer(job_id, chunks, mode, request_bytes)
        self.handle.dead = True


@pytest.mark.parametrize("death", [ActorDiedError, RayActorError])
def test_the_driver_outlives_a_dead_coordinator_and_its_stale_handle(
    state: SqlStateStore, death: type
) -> None:
    jobs = [pending_job(state, n) for n in range(3)]
    first = DiesAfterOffer(state, answer=False)
    first.handle = StandInCoordinator(first, death=death)
    live = CoordinatorState(state)
    # After the death, the first fetch still finds the dead actor's handle; the next one is live.
    handles = [first.handle, StandInCoordinator(first, dead=True, death=death), StandInCoordinator(live)]
    fetched: list[Any] = []

    def coordinator() -> Any:
        fetched.append(handles[min(len(fetched), len(handles) - 1)])
        return fetched[-1]

    log: list[tuple[str, int]] = []
    parts = driver_parts(state, StandInTasks(), [StandInWriter(state, log)], coordinator)
    pauses: list[float] = []
    ended = Driver(state, jobs, parts, sleep=Pauses(pauses)).run()

    assert [j.status for j in ended] == [JobStatus.COMPLETED] * 3
    assert len(first.offered) == 1
    assert first.offered[0] in live.offered  # what the dead one held was offered again
    assert len(fetched) >= 3
    assert any(p > 0 for p in pauses)  # a stale handle is fetched again after a pause
