"""The one settings object: the seed's env names work as written, bad values name their variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from raybatch.errors import ConfigError
from raybatch.settings import (
    ClaudeSettings,
    Modality,
    ProcessingMode,
    StateSettings,
    WriterSettings,
    load_settings,
)

SEED_KNOBS = {
    "PROCESSING_MODE": ("sync", "processing_mode", ProcessingMode.SYNC),
    "OCR_WORKERS": ("3", "ocr_workers", 3),
    "BATCH_SIZE": ("50", "batch_size", 50),
    "POLL_INTERVAL": ("2.5", "poll_interval", 2.5),
    "RESULT_WORKERS": ("6", "result_workers", 6),
    "MAX_CONCURRENT_MB": ("4096", "max_concurrent_mb", 4096),
    "DATABASE_URL": ("postgresql+psycopg://u:p@h/db", "database_url", "postgresql+psycopg://u:p@h/db"),
    "PAGE_MODALITY": ("images", "page_modality", Modality.IMAGES),
}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env file
    for name in [*SEED_KNOBS, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "STORE", "RAYBATCH_HOME"]:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("name", sorted(SEED_KNOBS))
def test_seed_knob_names_work_as_written(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    raw, field, expected = SEED_KNOBS[name]
    monkeypatch.setenv(name, raw)
    assert getattr(load_settings(), field) == expected


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("POLL_INTERVAL", "soon"),
        ("BATCH_SIZE", "0"),
        ("PROCESSING_MODE", "fast"),
        ("MAX_CONCURRENT_MB", "-1"),
    ],
)
def test_an_invalid_value_is_one_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=name) as caught:
        load_settings()
    assert str(caught.value).count(name) == 1


def test_defaults_are_the_embedded_ones() -> None:
    settings = load_settings()
    assert settings.database_url == "sqlite:///raybatch-data/state.db"
    assert settings.store == "raybatch-data/store"
    assert not settings.uses_emulator  # the emulator answers only when asked for
    assert (settings.processing_mode, settings.batch_size, settings.poll_interval) == ("batch", 30, 10.0)


def test_the_api_key_is_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-for-logs")
    settings = load_settings()
    assert "not-for-logs" not in repr(settings) and "not-for-logs" not in str(settings)
    claude = settings.section(ClaudeSettings)
    assert claude.anthropic_api_key is not None
    assert claude.anthropic_api_key.get_secret_value() == "test-key-not-for-logs"


def test_sections_carry_their_own_fields_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESULT_WORKERS", "5")
    settings = load_settings(database_url="sqlite:///x.db")
    assert settings.section(WriterSettings).result_workers == 5
    state = settings.section(StateSettings)
    assert state.database_url == "sqlite:///x.db"
    assert not hasattr(state, "result_workers")


def test_anthropic_limits_cannot_be_exceeded() -> None:
    with pytest.raises(ConfigError, match="BATCH_MAX_MB"):
        load_settings(batch_max_mb=300)
    with pytest.raises(ConfigError, match="BATCH_MAX_REQUESTS"):
        load_settings(batch_max_requests=100_001)


def test_without_a_key_the_emulator_must_be_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="--emulator"):
        load_settings().require_claude()
    monkeypatch.setenv("RAYBATCH_EMULATOR", "1")
    settings = load_settings()
    assert settings.uses_emulator
    settings.require_claude()
