"""The coordinator's name: the database's id, the Claude settings that shape its calls, the code.
A run with other settings or code gets a coordinator of its own instead of the first run's."""

from __future__ import annotations

from pathlib import Path

import pytest

from raybatch.coordinator.identity import code_version, coordinator_identity
from raybatch.settings import Settings, load_settings
from raybatch.shells.runtime import coordinator_name

KEY = "fake-key-identity-test"
DB_ID = "3f2a9c01b7d4e5f6a7b8"


def settings(**overrides: object) -> Settings:
    values: dict[str, object] = {
        "anthropic_api_key": KEY,
        "database_url": "postgresql+psycopg://raybatch:first-password@db.example/raybatch",
    }
    return load_settings(**{**values, **overrides})


def test_the_name_follows_the_database_id_not_its_url_and_never_shows_a_secret() -> None:
    first = coordinator_name(settings(), DB_ID)
    moved = settings(database_url="postgresql+psycopg://raybatch:rotated-password@db2.example/raybatch")
    assert coordinator_name(moved, DB_ID) == first, "the same database under another password or host"
    assert coordinator_name(settings(), "a-different-database") != first
    assert DB_ID[:16] in first
    for secret in (KEY, "first-password", "db.example"):
        assert secret not in first


@pytest.mark.parametrize(
    "change",
    [
        {"claude_model": "claude-haiku-4-5"},
        {"anthropic_base_url": "http://127.0.0.1:9999"},
        {"anthropic_api_key": "fake-key-another"},
        {"batch_size": 50},
        {"batch_max_requests": 500},
        {"poll_interval": 30.0},
        {"sync_concurrency": 8},
    ],
)
def test_settings_that_shape_calls_make_another_coordinator(change: dict[str, object]) -> None:
    assert coordinator_name(settings(**change), DB_ID) != coordinator_name(settings(), DB_ID)


def test_what_each_run_chooses_itself_keeps_the_coordinator() -> None:
    per_run = settings(processing_mode="sync", max_cost_usd=5.0, max_daily_cost_usd=50.0)
    assert coordinator_name(per_run, DB_ID) == coordinator_name(settings(), DB_ID)


def test_other_code_makes_another_coordinator() -> None:
    claude = settings()
    assert coordinator_identity(claude, DB_ID, "0.1.0+aaaa") != coordinator_identity(
        claude, DB_ID, "0.1.0+bbbb"
    )
    assert code_version().startswith("0.1.0+")


def test_the_readmes_runtime_env_json_example_reaches_the_coordinator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = coordinator_name(settings(), DB_ID)
    monkeypatch.setenv("BATCH_SIZE", "50")  # --runtime-env-json '{"env_vars": {"BATCH_SIZE": "50", ...}}'
    monkeypatch.setenv("POLL_INTERVAL", "30")
    after = settings()
    assert after.batch_size == 50
    assert coordinator_name(after, DB_ID) != before
    assert after.for_coordinator().claude.batch_size == 50  # what the new coordinator is built from


def test_without_an_id_given_the_name_reads_it_from_the_database(tmp_path: Path) -> None:
    one = settings(database_url=f"sqlite:///{tmp_path / 'one.db'}")
    two = settings(database_url=f"sqlite:///{tmp_path / 'two.db'}")
    assert coordinator_name(one) != coordinator_name(two)
    assert coordinator_name(one) == coordinator_name(one)
