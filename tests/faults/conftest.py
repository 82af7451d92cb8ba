"""Fixtures of the fault suite: an emulator and the pipeline tests' builders (its SQLite state store is
the shared ``state`` fixture)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "pipeline"))  # builders.py, pipeline_support.py

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer


@pytest.fixture
def emulator() -> Iterator[EmulatorServer]:
    with EmulatorServer(EmulatorConfig(processing_seconds=0)) as server:
        yield server
