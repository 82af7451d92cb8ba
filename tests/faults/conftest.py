"""Fixtures of the fault suite: an emulator, a SQLite state store, and the pipeline tests' builders."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "pipeline"))  # builders.py, pipeline_support.py

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.settings import StateSettings
from raybatch.state import SqlStateStore, open_state


@pytest.fixture
def emulator() -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(processing_seconds=0)) as server:
        yield server


@pytest.fixture
def state(tmp_path: Path) -> SqlStateStore:
    return open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
