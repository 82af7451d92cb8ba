"""Where settings come from: flag > environment > .env > raybatch.toml > default; RAYBATCH_* names,
the old names with a deprecation line, an unknown name stopped with the nearest one."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from raybatch import settings_sources
from raybatch.errors import ConfigError
from raybatch.settings import load_settings, load_settings_with_origins, secret_env_names


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("RAYBATCH_") and not name.startswith("RAYBATCH_TEST_"):
            monkeypatch.delenv(name)
    for name in ("MAX_TOKENS", "BATCH_SIZE", "STORE", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(settings_sources, "_warned", set())


def test_own_settings_are_read_with_the_prefix_and_owned_ones_by_their_owners_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAYBATCH_MAX_TOKENS", "8192")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("RAYBATCH_HOME", "/tmp/rb-home")
    settings = load_settings()
    assert settings.max_tokens == 8192
    assert settings.anthropic_base_url == "http://127.0.0.1:9"
    assert str(settings.raybatch_home) == "/tmp/rb-home"


def test_names_are_case_sensitive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("raybatch_max_tokens", "8192")
    assert load_settings().max_tokens == 4096


def test_an_old_name_still_works_with_one_deprecation_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("BATCH_SIZE", "7")
    with caplog.at_level(logging.WARNING, logger="raybatch.settings_sources"):
        assert load_settings().batch_size == 7
        assert load_settings().batch_size == 7
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["the setting BATCH_SIZE is deprecated: use RAYBATCH_BATCH_SIZE"]


def test_the_new_name_wins_over_the_old(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCH_SIZE", "7")
    monkeypatch.setenv("RAYBATCH_BATCH_SIZE", "9")
    assert load_settings().batch_size == 9


def test_an_unknown_raybatch_name_stops_with_the_nearest_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYBATCH_MAX_TOKEN", "8192")
    with pytest.raises(
        ConfigError, match=r"unknown setting RAYBATCH_MAX_TOKEN .*did you mean RAYBATCH_MAX_TOKENS\?"
    ):
        load_settings()


def test_the_test_suites_own_variables_are_not_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYBATCH_TEST_SOMETHING", "x")
    load_settings()


def test_precedence_is_flag_then_environment_then_dotenv_then_file_then_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "raybatch.toml").write_text("max_tokens = 5000\nbatch_size = 11\npoll_interval = 3.5\n")
    (tmp_path / ".env").write_text("RAYBATCH_BATCH_SIZE=12\nRAYBATCH_POLL_INTERVAL=4.5\n")
    monkeypatch.setenv("RAYBATCH_POLL_INTERVAL", "5.5")
    settings, origins = load_settings_with_origins(sync_concurrency=6)
    assert settings.sync_concurrency == 6 and str(origins["sync_concurrency"]) == "flag"
    assert (
        settings.poll_interval == 5.5
        and str(origins["poll_interval"]) == "environment RAYBATCH_POLL_INTERVAL"
    )
    assert settings.batch_size == 12 and str(origins["batch_size"]) == ".env RAYBATCH_BATCH_SIZE"
    assert settings.max_tokens == 5000 and str(origins["max_tokens"]) == "file raybatch.toml"
    assert settings.max_attempts == 3 and "max_attempts" not in origins


def test_a_config_file_given_by_path_and_in_a_raybatch_table(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere.toml"
    path.write_text("[raybatch]\nmax_tokens = 6000\n")
    assert load_settings(config_file=path).max_tokens == 6000


def test_an_unknown_key_in_the_file_stops_with_the_nearest_one(tmp_path: Path) -> None:
    path = tmp_path / "raybatch.toml"
    path.write_text("max_tokns = 6000\n")
    with pytest.raises(
        ConfigError, match=r"raybatch.toml: unknown setting 'max_tokns': did you mean max_tokens\?"
    ):
        load_settings()


def test_a_broken_config_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("max_tokens = = 1\n")
    with pytest.raises(ConfigError, match=r"bad.toml: not valid TOML"):
        load_settings(config_file=path)
    with pytest.raises(ConfigError, match=r"missing.toml: cannot read the config file"):
        load_settings(config_file=tmp_path / "missing.toml")


def test_a_bad_value_names_the_variable_users_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYBATCH_MAX_TOKENS", "12")
    with pytest.raises(ConfigError, match=r"RAYBATCH_MAX_TOKENS: "):
        load_settings()


def test_secret_names_include_new_and_old_names() -> None:
    environ = {"RAYBATCH_S3_SECRET_KEY": "x", "MINIO_SECRET_KEY": "y", "S3_SECRET_KEY": "w", "PATH": "/"}
    assert secret_env_names(environ) == ["MINIO_SECRET_KEY", "RAYBATCH_S3_SECRET_KEY", "S3_SECRET_KEY"]


def test_raybatch_config_prints_each_setting_its_origin_and_masks_secrets(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from raybatch.cli import main

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-not-to-be-shown")
    monkeypatch.setenv("RAYBATCH_DATABASE_URL", "postgresql+psycopg://u:hunter2@db/x")
    assert main(["config", "--json", "-v"]) == 0
    out = capsys.readouterr().out
    assert "sk-not-to-be-shown" not in out and "hunter2" not in out
    shown = json.loads(out)
    assert shown["anthropic_api_key"]["from"] == "environment ANTHROPIC_API_KEY"
    assert shown["database_url"]["value"] == "postgresql+psycopg://u:***@db/x"
    assert shown["max_tokens"] == {"env": "RAYBATCH_MAX_TOKENS", "value": "4096", "from": "default"}


def test_the_cli_reads_a_config_file_named_anywhere_on_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from raybatch.cli import main

    (tmp_path / "mine.toml").write_text("max_tokens = 7000\n")
    assert main(["config", "--json", "--config", str(tmp_path / "mine.toml")]) == 0
    assert json.loads(capsys.readouterr().out)["max_tokens"]["value"] == "7000"
