"""The round trip: the sample corpus's requests → packed batches → the emulator through the real
SDK → results filed by custom_id → stitched documents equal to the truth, field by field."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import offer, prepared_job

from raybatch.claude.answer import ChunkAnswer
from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.models import JobStatus
from raybatch.samples import plan_corpus
from raybatch.samples.write import bundle_truth
from raybatch.settings import ClaudeSettings, StateSettings
from raybatch.state import open_state
from raybatch.steps.stitch import stitch

FIELDS = ("first_page", "last_page", "type", "number", "counterparty", "amount", "currency", "reference")


@pytest.mark.anyio
async def test_the_corpus_through_batches_stitches_to_the_truth(tmp_path: Path) -> None:
    plan = plan_corpus(6, 7)
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
    jobs = {
        bundle.file: prepared_job(state, [p.text for p in bundle.pages], name=bundle.file)
        for bundle in plan.bundles
    }
    with EmulatorServer(EmulatorConfig(processing_seconds=0)) as emulator:
        # 5 requests a batch: the corpus needs several, so packing and filing across batches is exercised
        claude = ClaudeSettings.model_validate(
            {"anthropic_base_url": emulator.base_url, "anthropic_api_key": "k", "batch_max_requests": 5}
        )
        emulator.faults.duplicate_fraction = 0.2  # duplicated result lines must not count twice

        coordinator = BatchCoordinator(claude, state, autostart=False)
        for job in jobs.values():
            await offer(coordinator, job)
        await coordinator.flush()
        for _ in range(20):
            await coordinator.step()
            if {state.get_job(j.job_id).status for j in jobs.values()} == {JobStatus.ANSWERED}:
                break
        await coordinator.stop()
        batches = emulator.app.calls["create"]
    requests = sum(len(j.chunks) for j in jobs.values())
    assert batches >= 2 and requests == 22
    for bundle in plan.bundles:
        job = jobs[bundle.file]
        chunks = state.get_chunks(job.job_id)
        answers = [(c.n, ChunkAnswer.model_validate_json(c.answer or "")) for c in chunks]
        found = [
            {name: getattr(doc, name) for name in FIELDS} | {"type": str(doc.type)}
            for doc in stitch(answers, len(bundle.pages))
        ]
        truth = [{name: d[name] for name in FIELDS} for d in bundle_truth(bundle, "")["documents"]]
        assert found == truth, bundle.file
