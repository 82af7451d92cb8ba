"""Fixtures of the console's tests: the small database and store, and the app in-process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from console_builders import ConsoleData, build_console_data
from starlette.testclient import TestClient


@pytest.fixture
def data(tmp_path) -> Iterator[ConsoleData]:  # type: ignore[no-untyped-def]
    built = build_console_data(tmp_path)
    yield built
    built.state.close()


@pytest.fixture
def client(data: ConsoleData) -> Iterator[TestClient]:
    """The loopback console (no login) driven in-process."""
    with TestClient(data.app(), base_url="http://127.0.0.1") as test_client:
        yield test_client
