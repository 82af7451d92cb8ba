"""Fixtures for pipeline tests on a local Ray: one Ray per session, a warm OCR cache, an emulator."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pipeline_support import CorpusRun, run_settings

from raybatch.objects import LocalObjectStore
from raybatch.pipeline import run
from raybatch.samples import write_samples
from raybatch.settings import StateSettings
from raybatch.state import open_state

RESULT_MB_DECLARED = 100_000  # the local node's writer resource: any test's MAX_CONCURRENT_MB fits


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """A local Ray for the whole session; pipeline runs join it instead of starting their own."""
    import ray

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(
        address="local",
        num_cpus=2,
        namespace="raybatch",
        resources={"result_mb": RESULT_MB_DECLARED},
        include_dashboard=False,
        log_to_driver=False,
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def corpus_run(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> CorpusRun:
    """The default sample corpus (6 bundles, scans and rotations included), run once with OCR."""
    home = tmp_path_factory.mktemp("corpus")
    truth = write_samples(home / "samples", bundles=6, seed=7)
    settings = run_settings(home, raybatch_emulator=True)  # the pipeline starts its own emulator
    notices: list[str] = []
    report = run(settings, str(home / "samples"), notice=notices.append)
    assert any("emulator" in n for n in notices), "the run must say it uses the emulator"
    state = open_state(settings.section(StateSettings))
    return CorpusRun(settings, truth, report, state, LocalObjectStore(settings.store))
