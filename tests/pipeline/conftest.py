"""Fixtures for pipeline tests on a local Ray: one Ray per session, a warm OCR cache, an emulator."""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.objects import LocalObjectStore
from raybatch.pipeline import RunReport, run
from raybatch.samples import write_samples
from raybatch.settings import Settings, StateSettings, load_settings
from raybatch.state import SqlStateStore, open_state

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


@pytest.fixture
def emulator() -> Iterator[EmulatorServer]:
    """The Claude emulator on loopback, batches ending after half a second."""
    with EmulatorServer(EmulatorConfig(processing_seconds=0.5)) as server:
        yield server


def run_settings(home: Path, emulator: EmulatorServer | None = None, **overrides: Any) -> Settings:
    """Settings for one run in its own folder (SQLite + local store), pointed at ``emulator``."""
    values: dict[str, Any] = {"raybatch_home": str(home), "poll_interval": 0.5, "lease_seconds": 6.0}
    if emulator is not None:
        values |= {"anthropic_base_url": emulator.base_url, "anthropic_api_key": "test-key"}
    return load_settings(**(values | overrides))


def copy_ocr_cache(source_db: Path, target_db: Path) -> int:
    """Give a fresh state database the OCR results of an earlier run (same files, same pages)."""
    with sqlite3.connect(target_db) as conn:
        conn.execute("ATTACH DATABASE ? AS warm", (str(source_db),))
        count = conn.execute("INSERT OR IGNORE INTO page_ocr SELECT * FROM warm.page_ocr").rowcount
        conn.commit()
        conn.execute("DETACH DATABASE warm")
    return count


@dataclass
class CorpusRun:
    settings: Settings
    truth: dict
    report: RunReport
    state: SqlStateStore
    store: LocalObjectStore


@pytest.fixture(scope="session")
def corpus_run(ray_session: None, tmp_path_factory: pytest.TempPathFactory) -> CorpusRun:
    """The default sample corpus (6 bundles, scans and rotations included), run once with OCR."""
    home = tmp_path_factory.mktemp("corpus")
    truth = write_samples(home / "samples", bundles=6, seed=7)
    settings = run_settings(home)  # no API key: the pipeline starts its own emulator
    notices: list[str] = []
    report = run(settings, str(home / "samples"), notice=notices.append)
    assert any("emulator" in n for n in notices), "the run must say it uses the emulator"
    state = open_state(settings.section(StateSettings))
    return CorpusRun(settings, truth, report, state, LocalObjectStore(settings.store))


def corpus_subset(corpus: CorpusRun, files: list[str], folder: Path) -> dict:
    """Some bundles of the session's corpus in ``folder`` (same bytes, so the OCR cache applies),
    and their truth."""
    folder.mkdir(parents=True, exist_ok=True)
    samples = Path(corpus.settings.raybatch_home) / "samples"
    for name in files:
        shutil.copyfile(samples / name, folder / name)
    bundles = [b for b in corpus.truth["bundles"] if b["file"] in files]
    return {**corpus.truth, "bundles": bundles, "groups": []}


def warm_settings(
    corpus: CorpusRun, home: Path, emulator: EmulatorServer | None = None, **overrides: Any
) -> Settings:
    """Run settings whose fresh database already holds the corpus run's OCR results."""
    settings = run_settings(home, emulator, **overrides)
    open_state(settings.section(StateSettings)).close()
    copy_ocr_cache(Path(corpus.settings.raybatch_home) / "state.db", home / "state.db")
    return settings
