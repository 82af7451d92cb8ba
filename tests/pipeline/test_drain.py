"""SIGTERM or Ctrl-C drains a run: no more work is taken, the writes under way may end within
DRAIN_SECONDS, and the rest is handed back at once (no lease is left to run out, no try counted)."""

from __future__ import annotations

import os
import signal
import time

import pytest
from driver_support import (
    CoordinatorState,
    StandInCoordinator,
    StandInTasks,
    StandInWriter,
    driver_parts,
    pending_job,
)

from raybatch.loops.driver import Driver
from raybatch.models import JobStatus
from raybatch.state import SqlStateStore
from raybatch.stopping import stop_on_signals


def test_a_stop_hands_back_what_is_in_flight_and_takes_nothing_new(state: SqlStateStore) -> None:
    preparing = pending_job(state, 1, pages=16)  # its chunks never finish preparing
    writing = pending_job(state, 2, status=JobStatus.ANSWERED)  # its write never ends
    waiting = [pending_job(state, n) for n in range(3, 8)]  # not claimed yet
    tasks, log = StandInTasks(hold=True), []
    writer = StandInWriter(state, log, hold=True)
    coordinator = CoordinatorState(state)
    parts = driver_parts(state, tasks, [writer], lambda: StandInCoordinator(coordinator))
    parts.start_writer = lambda: False
    parts.scheduler._cap = lambda: 2  # the window: the other jobs wait to be claimed
    driver = Driver(state, [preparing, writing, *waiting], parts, claim_window=1, drain_seconds=0.0)
    steps = iter(range(100))

    ended = driver.run(stop=lambda: next(steps) >= 3)  # a signal arrives after three steps

    by_id = {job.id: job for job in ended}
    assert log == [("start", writing)], "the write started and was handed back, not finished"
    assert by_id[writing].status is JobStatus.ANSWERED and by_id[writing].attempts == 0
    assert by_id[preparing].status is JobStatus.PENDING and by_id[preparing].attempts == 0
    assert all(by_id[j].status is JobStatus.PENDING for j in waiting)
    assert all(by_id[j].held_until is None for j in (preparing, writing)), "leases ended at once"
    assert tasks.launched and not parts.scheduler.held and not parts.writers.leases


def test_sigterm_and_a_first_ctrl_c_ask_for_a_drain() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with stop_on_signals() as stop:
        assert not stop()
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop() and stop.signal == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before
    with stop_on_signals() as stop:
        os.kill(os.getpid(), signal.SIGINT)  # a first Ctrl-C drains; a second would interrupt
        assert stop()


def test_outside_the_drive_a_signal_interrupts_at_once() -> None:
    """Connected, but the driver takes no work yet (or has ended: the table is compacted): nothing
    to drain, so SIGTERM interrupts and the run's ``finally`` blocks give back what it holds."""
    with stop_on_signals(drain=False) as stop:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs at the next instruction: never waited out
        with stop.draining():  # the driver's loop
            os.kill(os.getpid(), signal.SIGTERM)
            assert stop() and stop.signal == signal.SIGTERM
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)  # drained and ended: compacting
            time.sleep(5)
