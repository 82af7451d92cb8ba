"""Money on local Ray: emulated answers marked and redone under a key, answers reused exactly when
they would be the same, costs that follow the mode each request was sent with."""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import pytest
from pipeline_support import CorpusRun, corpus_subset, warm_settings

from raybatch.claude.emulator import EmulatorServer
from raybatch.cost import prices_for
from raybatch.models import JobStatus
from raybatch.objects import LocalObjectStore
from raybatch.pipeline import run
from raybatch.report import status_summary
from raybatch.settings import Modality, Settings, StateSettings
from raybatch.state import open_state

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def requests_sent(emulator: EmulatorServer) -> int:
    """Requests in every batch the emulator holds, counted through the SDK."""
    with anthropic.Anthropic(api_key="test-key", base_url=emulator.base_url) as client:
        batches = client.messages.batches.list(limit=100)
        return sum(sum(b.request_counts.model_dump().values()) for b in batches)


def _smallest(corpus: CorpusRun) -> str:
    return min(corpus.truth["bundles"], key=lambda b: b["pages"])["file"]


def _summary(settings: Settings) -> dict:
    state = open_state(settings.section(StateSettings))
    return status_summary(state, prices_for(settings.claude_model))


def _manifests(settings: Settings) -> list[dict]:
    store = LocalObjectStore(settings.store)
    return [json.loads(store.get(k)) for k in sorted(store.list("jobs/")) if k.endswith("manifest.json")]


def test_emulated_answers_are_marked_redone_under_a_key_and_reused_only_when_unchanged(
    corpus_run: CorpusRun, emulator: EmulatorServer, tmp_path: Path
) -> None:
    emulator.config.processing_seconds = 0.0
    source = str(tmp_path / "in")
    corpus_subset(corpus_run, [_smallest(corpus_run)], tmp_path / "in")
    real = warm_settings(corpus_run, tmp_path / "home", emulator)  # an emulator with a key: "real"
    emulated = real.model_copy(update={"raybatch_emulator": True})

    assert run(emulated, source).ok
    chunks = _summary(emulated)["requests"]
    assert _summary(emulated)["requests_emulated"] == chunks == requests_sent(emulator)
    assert [m["emulated"] for m in _manifests(emulated)] == [True]

    report = run(real, source)  # a key now: the emulated answers are not kept as finished work
    assert report.ok and requests_sent(emulator) == 2 * chunks
    summary = _summary(real)
    assert (summary["requests_emulated"], summary["requests_reused"]) == (0, 0)
    assert [m["emulated"] for m in _manifests(real)] == [False]
    assert [m["answered_by"]["claude"] for m in _manifests(real)] == [chunks]

    assert run(real, source).ok and requests_sent(emulator) == 2 * chunks  # nothing changed
    forced = run(real, source, force=True)  # new jobs, the same requests: answers reused
    assert forced.ok and requests_sent(emulator) == 2 * chunks
    assert _summary(real)["requests_reused"] == chunks
    assert [j.status for j in forced.jobs] == [JobStatus.COMPLETED]

    other = real.model_copy(update={"page_modality": Modality.IMAGES})  # another request: sent again
    assert run(other, source).ok and requests_sent(emulator) == 3 * chunks
