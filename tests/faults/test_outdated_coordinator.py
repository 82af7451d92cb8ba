"""A coordinator that no longer matches (a newer one, from a run with other settings or code, beats
on its database) finishes what it holds and takes nothing new: it gives up the lead, sweeps no
more, polls only the batch it created, and idles out once that one is filed."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from builders import bundle_texts, offer, prepared_job
from clock import FakeClock
from fault_support import assert_ledger, claude

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer, ManualClock
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.models import JobStatus
from raybatch.state import SqlStateStore

LEASE = 30.0  # COORDINATOR_LEASE_SECONDS: a beat is due every third of it


class Counting:
    """The state store, counting the calls made through it."""

    def __init__(self, inner: SqlStateStore) -> None:
        self._inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return target(*args, **kwargs)

        return call


@pytest.mark.anyio
async def test_an_outdated_coordinator_finishes_its_own_batch_and_takes_nothing_new(
    state: SqlStateStore,
) -> None:
    api_time, clock = ManualClock(), FakeClock()  # the batches' processing; the coordinators' beats
    with EmulatorServer(EmulatorConfig(processing_seconds=10, clock=api_time)) as emulator:
        seen_by_old = Counting(state)

        def built(name: str, store: Any, **settings: Any) -> BatchCoordinator:
            values = claude(emulator, coordinator_lease_seconds=LEASE, **settings)
            return BatchCoordinator(
                values, store, autostart=False, coordinator_id=name, monotonic=clock.monotonic
            )

        old = built("coordinator-old", seen_by_old)
        mine = prepared_job(state, bundle_texts(0), name="old")
        theirs = prepared_job(state, bundle_texts(1), name="new")
        await offer(old, mine)
        await old.flush()
        await old.step()  # it leads, sweeps, and creates its batch
        new = built("coordinator-new", state, batch_size=7)  # a run with other settings
        await offer(new, theirs)
        await new.flush()
        await new.step()  # the old one still holds the lead: the new one creates its batch only
        assert old._recovery.lead and not new._recovery.lead

        clock.advance(LEASE)  # a beat is due for both; both are live in the database
        api_time.advance(11)  # both batches ended at the API
        swept = seen_by_old.calls["unsettled_jobs"]
        await old.step()
        assert not old._recovery.lead, "the outdated coordinator kept the lead"
        assert seen_by_old.calls["unsettled_jobs"] == swept, "the outdated coordinator swept"
        assert state.get_job(mine.job_id).status is JobStatus.ANSWERED  # its own batch, filed by it
        assert state.get_job(theirs.job_id).status is not JobStatus.ANSWERED, "it polled another's batch"

        await new.step()  # the newest leads from its next beat
        assert new._recovery.lead and not old._recovery.lead
        assert state.get_job(theirs.job_id).status is JobStatus.ANSWERED
        clock.advance(old._claude.coordinator_idle_seconds)
        await old.step()
        assert old.idle and not old._recovery.lead  # nothing of its own left: it may exit
        assert_ledger(state, emulator.app.answers(), answered=[mine.job_id, theirs.job_id])
        await old.stop()
        await new.stop()
