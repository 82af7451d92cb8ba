"""The cycle collector in a run's processes: seldom in Ray's workers and in the driver while it runs."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
import ray
from pipeline_support import CorpusRun, corpus_subset, warm_settings

from raybatch.claude.emulator import EmulatorServer
from raybatch.collector import SELDOM
from raybatch.pipeline import run

pytestmark = [pytest.mark.ray]


@ray.remote
def _thresholds() -> tuple[int, int, int]:
    import raybatch  # noqa: F401  (what a worker of raybatch imports first)

    return gc.get_threshold()


def test_rays_workers_collect_seldom(ray_session: None) -> None:
    assert ray.get(_thresholds.remote(), timeout=60) == SELDOM


def test_a_run_collects_seldom_while_it_drives_and_leaves_its_callers_collector_as_it_was(
    corpus_run: CorpusRun, emulator: EmulatorServer, tmp_path: Path
) -> None:
    emulator.config.processing_seconds = 0.0
    smallest = min(corpus_run.truth["bundles"], key=lambda b: b["pages"])["file"]
    corpus_subset(corpus_run, [smallest], tmp_path / "in")
    gc.unfreeze()  # as in a caller that froze nothing
    before = gc.get_threshold(), 0
    seen: set[tuple[int, int, int]] = set()
    assert run(
        warm_settings(corpus_run, tmp_path / "home", emulator),
        str(tmp_path / "in"),
        on_progress=lambda _: seen.add(gc.get_threshold()),
    ).ok
    assert seen == {SELDOM}
    assert (gc.get_threshold(), gc.get_freeze_count()) == before
