"""Fixtures for pipeline tests on a local Ray: one Ray per session, a warm OCR cache, an emulator."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.settings import Settings, load_settings

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
