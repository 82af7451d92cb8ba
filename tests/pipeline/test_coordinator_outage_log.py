"""The coordinator's loop during an outage: it goes on, and says so in a line now and then, not a
traceback a pass."""

from __future__ import annotations

import asyncio
import itertools
import logging

import pytest
from builders import claude_settings
from clock import FakeClock

from raybatch.claude.emulator import EmulatorServer
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.errors import DatabaseUnavailable
from raybatch.outage import SAY_EVERY_SECONDS
from raybatch.state import SqlStateStore


@pytest.mark.anyio
async def test_passes_failing_in_an_outage_are_said_now_and_then_and_the_end_once(
    emulator: EmulatorServer, state: SqlStateStore, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    coord = BatchCoordinator(claude_settings(emulator), state, monotonic=clock.monotonic)
    coord._delays = itertools.repeat(0.0)
    outcomes = iter([*["down"] * 5, "later", "down", "up"])
    passes: list[str] = []

    async def step() -> bool:
        outcome = next(outcomes, "up")
        passes.append(outcome)
        if outcome == "later":
            clock.advance(SAY_EVERY_SECONDS)
        if outcome in ("down", "later"):
            raise DatabaseUnavailable("state database sqlite:///state.db unavailable: OperationalError")
        return False

    coord.step = step  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger="raybatch.coordinator.coordinator"):
        await coord.snapshot()  # starts the loop
        for _ in range(200):
            if len(passes) >= 9:
                break
            await asyncio.sleep(0.01)
        await coord.stop()

    lines = [r for r in caplog.records if "coordinator pass" in r.getMessage()]
    assert passes[:8] == [*["down"] * 5, "later", "down", "up"], "the loop went on through the outage"
    assert [r.levelname for r in lines] == ["WARNING", "WARNING", "INFO"]
    assert all(r.exc_info is None for r in lines), "no traceback for an outage"
    assert "failing for 0 s: state database" in lines[0].getMessage()
    assert f"failing for {SAY_EVERY_SECONDS:.0f} s" in lines[1].getMessage()
    assert "work again after" in lines[2].getMessage()
