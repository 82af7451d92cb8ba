"""Two coordinators on one database, and a create that failed with a 5xx: the batch adopted after
it is this coordinator's own, never the one another coordinator created and recorded meanwhile;
and the database holds each request in one CREATING intent at most."""

from __future__ import annotations

from typing import Any

import pytest
from builders import bundle_texts, offer, prepared_job, run_until
from fault_support import assert_ledger, claude, coordinator

from raybatch.claude.batch_client import AnthropicBatchClient
from raybatch.claude.emulator import EmulatorServer
from raybatch.claude.records import PreparedRequest
from raybatch.coordinator.batch_create import _marked
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.errors import UpstreamUnavailable
from raybatch.models import BatchStatus, JobStatus
from raybatch.state import SqlStateStore


class RacingBatches(AnthropicBatchClient):
    """B's batch client: its first create fails with a 500 that made nothing, and while it waits
    to look again, coordinator A creates a batch as large and records it."""

    def __init__(self, *args: Any, rival: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rival = rival

    def create(self, requests: Any) -> Any:
        if self._rival is not None:
            rival, self._rival = self._rival, None
            rival()
            raise UpstreamUnavailable("500 api_error (injected): nothing was created")
        return super().create(requests)


@pytest.mark.anyio
async def test_a_create_5xx_never_adopts_another_coordinators_batch(
    emulator: EmulatorServer, state: SqlStateStore
) -> None:
    theirs = prepared_job(state, bundle_texts(0), name="coordinator-a")
    ours = prepared_job(state, bundle_texts(0), name="coordinator-b")  # as many requests
    made: list[str] = []

    def coordinator_a_creates() -> None:
        requests: list[PreparedRequest] = [c.request for c in theirs.chunks.values()]
        intent = state.record_batch_intent([r.custom_id for r in requests], 1)
        with AnthropicBatchClient(claude(emulator)) as client:
            batch = client.create([_marked(r, state.database_id()) for r in requests])
        state.attach_batch(intent, batch.id, BatchStatus.IN_PROGRESS, "{}")
        made.append(batch.id)

    batches = RacingBatches(claude(emulator), rival=coordinator_a_creates)
    settings = claude(emulator, outage_budget=5.0)  # the create is tried again after its 500
    b = BatchCoordinator(settings, state, autostart=False, batches=batches, sleep=lambda _: None)
    await offer(b, ours)
    await b.flush()
    await run_until(b, state, [ours.job_id])
    await b.stop()
    a = coordinator(emulator, state)  # A files its own batch
    await offer(a, theirs)
    await run_until(a, state, [theirs.job_id])
    await a.stop()

    assert {c.batch_id for c in state.get_chunks(ours.job_id)}.isdisjoint(made), "B adopted A's batch"
    assert_ledger(state, emulator.app.answers(), answered=[ours.job_id, theirs.job_id])
    assert emulator.app.calls["create"] == 2
    assert {b.status for b in state.active_batches()} == set(), "an intent was left CREATING"
    assert state.get_job(ours.job_id).status is JobStatus.ANSWERED
