"""The one settings object: the documented env names work as written, bad values name their variable."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from raybatch.errors import ConfigError
from raybatch.settings import (
    ClaudeSettings,
    Modality,
    ProcessingMode,
    StateSettings,
    WriterSettings,
    load_settings,
    mask_url,
    secret_env_names,
)

DESIGN_KNOBS = {
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
    secrets = ["ANTHROPIC_API_KEY", "S3_SECRET_KEY", "MINIO_SECRET_KEY"]
    for name in [*DESIGN_KNOBS, *secrets, "ANTHROPIC_BASE_URL", "STORE", "RAYBATCH_HOME"]:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("name", sorted(DESIGN_KNOBS))
def test_design_knob_names_work_as_written(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    raw, field, expected = DESIGN_KNOBS[name]
    monkeypatch.setenv(name, raw)
    value = getattr(load_settings(), field)
    assert (value.get_secret_value() if isinstance(value, SecretStr) else value) == expected


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
    assert settings.database_url.get_secret_value() == "sqlite:///raybatch-data/state.db"
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
    assert state.database_url.get_secret_value() == "sqlite:///x.db"
    assert not hasattr(state, "result_workers")


def test_anthropic_limits_cannot_be_exceeded() -> None:
    with pytest.raises(ConfigError, match="BATCH_MAX_MB"):
        load_settings(batch_max_mb=300)
    with pytest.raises(ConfigError, match="BATCH_MAX_REQUESTS"):
        load_settings(batch_max_requests=100_001)


DB_PASSWORD = "db-pass-not-for-logs"
SECRETS = ("key-not-for-logs", DB_PASSWORD, "minio-not-for-logs")


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRETS[0])
    monkeypatch.setenv("DATABASE_URL", f"postgresql+psycopg://raybatch:{DB_PASSWORD}@db:5432/raybatch")
    monkeypatch.setenv("S3_SECRET_KEY", SECRETS[2])


@pytest.mark.usefixtures("secret_env")
def test_no_secret_in_any_repr_or_dump() -> None:
    settings = load_settings()
    bundles = [settings.for_prepare_tasks(), settings.for_writers(), settings.for_coordinator()]
    shown = [repr(settings), str(settings), settings.model_dump_json(), str(settings.model_dump())]
    shown += [*map(repr, bundles), *map(str, bundles)]
    shown += [str(settings.database_url), repr(settings.database_url)]
    for text in shown:
        assert not any(secret in text for secret in SECRETS), text
    # The URL is still readable where it is used, and shown with only the password masked.
    assert DB_PASSWORD in settings.database_url.get_secret_value()
    assert str(settings.database_url) == "postgresql+psycopg://raybatch:***@db:5432/raybatch"


@pytest.mark.usefixtures("secret_env")
def test_each_worker_gets_only_the_secrets_it_uses() -> None:
    settings = load_settings()
    prepare = settings.for_prepare_tasks().model_dump_json()
    assert "anthropic_api_key" not in prepare and "database_url" not in prepare
    assert "s3_secret_key" not in prepare
    writers = settings.for_writers()
    assert not hasattr(writers, "claude") and "anthropic_api_key" not in writers.model_dump_json()
    assert writers.state.database_url.get_secret_value() == settings.database_url.get_secret_value()
    coordinator = settings.for_coordinator()
    assert coordinator.claude.anthropic_api_key == settings.anthropic_api_key
    # The store, for the answers it spools while the database is away: it parses no source file.
    assert coordinator.store.s3_secret_key == settings.s3_secret_key
    assert not hasattr(coordinator, "prepare") and not hasattr(coordinator, "ocr")


def test_a_bad_database_url_error_does_not_repeat_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from raybatch.state import open_state

    with pytest.raises(ConfigError) as caught:
        open_state(StateSettings(database_url=f"not a url {DB_PASSWORD}"))
    assert DB_PASSWORD not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:p%40ss@h/db", "postgresql://u:***@h/db"),
        (
            "postgresql://h/db?user=u&password=pw&sslmode=require",
            "postgresql://h/db?user=u&password=***&sslmode=require",
        ),
        ("sqlite:///raybatch-data/state.db", "sqlite:///raybatch-data/state.db"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
    ],
)
def test_mask_url_hides_passwords_only(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_the_secret_variables_are_known_in_any_case() -> None:
    environ = {"ANTHROPIC_API_KEY": "k", "database_url": "u", "S3_SECRET_KEY": "s", "MINIO_SECRET_KEY": "s"}
    environ |= {"S3_ACCESS_KEY": "a", "PATH": "/bin"}
    expected = ["ANTHROPIC_API_KEY", "MINIO_SECRET_KEY", "S3_SECRET_KEY", "database_url"]
    assert secret_env_names(environ) == expected  # the old name too


def test_without_a_key_the_emulator_must_be_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="--emulator"):
        load_settings().require_claude()
    monkeypatch.setenv("RAYBATCH_EMULATOR", "1")
    settings = load_settings()
    assert settings.uses_emulator
    settings.require_claude()
