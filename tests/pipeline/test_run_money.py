"""Money on local Ray: emulated answers marked and redone under a key, answers reused exactly when
they would be the same, costs that follow the mode each request was sent with."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import anthropic
import pytest
from pipeline_support import CorpusRun, corpus_subset, warm_settings
from waiting import wait_for

from raybatch.claude.emulator import EmulatorServer
from raybatch.cost import prices_for
from raybatch.estimate import estimate
from raybatch.ids import OutputKeys
from raybatch.loops.driver import Progress
from raybatch.models import JobStatus
from raybatch.objects import LocalObjectStore
from raybatch.pipeline import run
from raybatch.report import status_summary
from raybatch.settings import DEFAULT_MODEL, Modality, Settings, StateSettings
from raybatch.spend import parked_reason, raise_caps
from raybatch.state import open_state

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def requests_sent(emulator: EmulatorServer) -> int:
    """Requests in every batch the emulator holds, counted through the SDK."""
    with anthropic.Anthropic(api_key="test-key", base_url=emulator.base_url) as client:
        batches = client.messages.batches.list(limit=100)
        return sum(sum(b.request_counts.model_dump().values()) for b in batches)


def _smallest(corpus: CorpusRun, count: int = 1) -> list[str]:
    return [b["file"] for b in sorted(corpus.truth["bundles"], key=lambda b: b["pages"])[:count]]


def _summary(settings: Settings) -> dict:
    state = open_state(settings.section(StateSettings))
    return status_summary(state, prices_for(settings.claude_model))


def _outputs(settings: Settings) -> list[str]:
    """Every object key of the settings' database's jobs."""
    jobs = OutputKeys(open_state(settings.section(StateSettings)).database_id()).jobs
    return sorted(LocalObjectStore(settings.store).list(jobs))


def _manifests(settings: Settings) -> list[dict]:
    store = LocalObjectStore(settings.store)
    return [json.loads(store.get(k)) for k in _outputs(settings) if k.endswith("manifest.json")]


def test_emulated_answers_are_marked_redone_under_a_key_and_reused_only_when_unchanged(
    corpus_run: CorpusRun, emulator: EmulatorServer, tmp_path: Path
) -> None:
    emulator.config.processing_seconds = 0.0
    source = str(tmp_path / "in")
    corpus_subset(corpus_run, _smallest(corpus_run), tmp_path / "in")
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


def test_estimate_predicts_the_run_that_prepares_nothing_again(
    corpus_run: CorpusRun, emulator: EmulatorServer, tmp_path: Path
) -> None:
    emulator.config.processing_seconds = 0.0
    source = str(tmp_path / "in")
    corpus_subset(corpus_run, _smallest(corpus_run, 2), tmp_path / "in")
    settings = warm_settings(corpus_run, tmp_path / "home", emulator)

    predicted = estimate(settings, source, dashboard=False)
    assert requests_sent(emulator) == 0 and not predicted["extrapolated"]
    assert predicted["cost_sync_usd"] == pytest.approx(2 * predicted["cost_batch_usd"], abs=1e-6)
    sampled = estimate(settings, source, sample=2, dashboard=False)  # prepared work is taken again
    assert sampled["extrapolated"] and sampled["requests_counted"] <= 3
    assert sampled["input_tokens"] == pytest.approx(predicted["input_tokens"], rel=0.25)

    progress: list[Progress] = []
    assert run(settings, source, on_progress=progress.append).ok
    assert progress[-1].pages_from_store == progress[-1].pages_total > 0  # nothing prepared again
    summary = _summary(settings)
    assert predicted["requests"] == summary["requests"] == requests_sent(emulator)
    assert predicted["input_tokens"] == pytest.approx(summary["input_tokens"], rel=0.05)
    assert predicted["cost_batch_usd"] == pytest.approx(summary["estimated_cost_usd"], rel=0.10)
    assert not [k for k in _outputs(settings) if "/prepared/" in k]


def test_sync_and_batch_costs_differ_by_the_batch_discount_everywhere(
    corpus_run: CorpusRun, emulator: EmulatorServer, tmp_path: Path
) -> None:
    emulator.config.processing_seconds = 0.0
    source = str(tmp_path / "in")
    corpus_subset(corpus_run, _smallest(corpus_run), tmp_path / "in")
    runs = {}
    for mode in ("batch", "sync"):
        settings = warm_settings(corpus_run, tmp_path / mode, emulator, processing_mode=mode)
        assert run(settings, source).ok
        runs[mode] = (_summary(settings), _manifests(settings))
    (batch, batch_manifests), (sync, sync_manifests) = runs["batch"], runs["sync"]
    discount = prices_for(DEFAULT_MODEL).batch_discount
    assert batch["input_tokens"] == sync["input_tokens"] and batch["output_tokens"] == sync["output_tokens"]
    assert batch["estimated_cost_usd"] == pytest.approx(sync["estimated_cost_usd"] * discount, abs=1e-6)
    for in_batch, in_sync in zip(batch_manifests, sync_manifests, strict=True):
        assert list(in_sync["usage_by_mode"]) == ["sync"] and list(in_batch["usage_by_mode"]) == ["batch"]
        expected = in_sync["estimated_cost_usd"] * discount
        assert in_batch["estimated_cost_usd"] == pytest.approx(expected, abs=1e-6)


def test_a_run_over_its_cap_parks_then_completes_after_resume_with_a_higher_cap(
    corpus_run: CorpusRun, emulator: EmulatorServer, tmp_path: Path
) -> None:
    emulator.config.processing_seconds = 0.0
    source = str(tmp_path / "in")
    corpus_subset(corpus_run, _smallest(corpus_run, 2), tmp_path / "in")
    settings = warm_settings(corpus_run, tmp_path / "home", emulator, max_cost_usd=0.000001)
    state = open_state(settings.section(StateSettings))
    progress: list[Progress] = []
    done: list[bool] = []
    thread = threading.Thread(
        target=lambda: done.append(run(settings, source, on_progress=progress.append).ok)
    )
    thread.start()
    wait_for(lambda: parked_reason(state) is not None, 300, "the run to park", 0.5)
    time.sleep(2.0)  # several coordinator passes: nothing goes while parked
    assert requests_sent(emulator) == 0
    assert _summary(settings)["spend"]["parked"]
    assert any(p.parked for p in progress)

    raise_caps(state, 100.0, None)  # ``raybatch resume --max-cost-usd 100``
    thread.join(300)
    assert done == [True] and parked_reason(state) is None
    assert 0 < _summary(settings)["spend"]["committed_run_usd"] <= 100.0
