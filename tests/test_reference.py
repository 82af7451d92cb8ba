"""The docs' CLI and settings references are made from the code: every command, flag and setting."""

from __future__ import annotations

from raybatch.cli import _parser
from raybatch.reference import cli_markdown, settings_markdown
from raybatch.settings import Settings
from raybatch.settings_sources import env_name


def test_the_settings_reference_lists_every_setting_once_with_its_meaning() -> None:
    text = settings_markdown()
    for name, info in Settings.model_fields.items():
        assert text.count(f"| `{env_name(name)}` |") == 1, name
        assert info.description, f"{name} has no description for the reference"


def test_the_cli_reference_lists_every_command_and_flag() -> None:
    text = cli_markdown(_parser())
    for command in ("run", "estimate", "status", "cancel", "config", "completion", "workload hold"):
        assert f"### `raybatch {command}`" in text
    assert "| `--db` |" in text and "| `--force` |" in text
