"""One bad batch or request never blocks the others."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from builders import bundle_texts, offer, prepared_job, run_until
from fault_support import assert_ledger, claude

from raybatch.claude.batch_client import AnthropicBatchClient, ResultStream
from raybatch.claude.emulator import EmulatorServer
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.errors import ResourceNotFound
from raybatch.state import SqlStateStore


class ExpiredResults(AnthropicBatchClient):
    """The API lost one batch's results (deleted, or past the 29 days): reading them is a 404."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gone: set[str] = set()

    @contextmanager
    def results(self, batch_id: str) -> Iterator[ResultStream]:
        if batch_id in self.gone:
            raise ResourceNotFound(f"open batch results: HTTP 404 not_found_error ({batch_id})")
        with super().results(batch_id) as stream:
            yield stream


@pytest.mark.anyio
async def test_a_batch_whose_results_are_gone_loses_only_itself(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    # The first batch is still in flight after the step that made it, however slow the machine;
    # then its results go, and the batches after it take 0.3 s.
    emulator.config.processing_seconds = 2.0
    poisoned = prepared_job(state, bundle_texts(0), name="poisoned")
    healthy = prepared_job(state, bundle_texts(1), name="healthy")
    settings = claude(emulator)
    client = ExpiredResults(settings)

    coord = BatchCoordinator(settings, state, batches=client, autostart=False)
    await offer(coord, poisoned)
    await coord.flush()
    await coord.step()
    [first] = state.active_batches()
    client.gone.add(first.anthropic_id or "")
    emulator.config.processing_seconds = 0.3
    await offer(coord, healthy)
    await run_until(coord, state, [poisoned.job_id, healthy.job_id])
    await coord.stop()
    assert_ledger(state, {}, answered=[poisoned.job_id, healthy.job_id])
    assert {c.attempts for c in state.get_chunks(poisoned.job_id)} == {1}, "sent again in a later batch"
    assert emulator.app.calls["create"] == 3


@pytest.mark.anyio
async def test_a_request_too_large_for_a_batch_fails_its_own_job_only(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    huge = prepared_job(state, bundle_texts(0), name="huge")
    normal = prepared_job(state, bundle_texts(1), name="normal")
    big = huge.chunks[1]
    huge.chunks[1] = dataclasses.replace(
        big, request=dataclasses.replace(big.request, encoded_size=2_000_000)
    )

    coord = BatchCoordinator(claude(emulator, batch_max_mb=1), state, autostart=False)
    await offer(coord, huge)
    await offer(coord, normal)
    await coord.flush()
    await run_until(coord, state, [huge.job_id, normal.job_id])
    await coord.stop()
    assert_ledger(
        state, emulator.app.answers(), answered=[normal.job_id], failed={huge.job_id: "InvalidRequest"}
    )
    assert "BATCH_MAX_MB" in (state.get_job(huge.job_id).error_message or "")
