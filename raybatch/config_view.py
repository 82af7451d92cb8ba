"""``raybatch config``: the effective settings, where each came from, secrets masked."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from raybatch.settings import Settings, load_settings_with_origins
from raybatch.settings_sources import env_name


def config_rows(config_file: Path | str | None = None) -> list[dict[str, str]]:
    """One row per setting: its name, environment name, effective value (masked) and origin."""
    settings, origins = load_settings_with_origins(config_file=config_file)
    return [
        {
            "setting": name,
            "env": env_name(name),
            "value": _shown(getattr(settings, name)),
            "from": str(origins.get(name, "default")),
        }
        for name in Settings.model_fields
    ]


def _shown(value: Any) -> str:
    if isinstance(value, SecretStr):
        return str(value)  # SecretStr and SecretUrl mask themselves
    if isinstance(value, Enum):
        return str(value.value)
    return "" if value is None else str(value)


def show_config(*, config_file: Path | str | None = None, as_json: bool = False) -> int:
    """Print the effective settings as a table, or one JSON object keyed by setting."""
    rows = config_rows(config_file)
    if as_json:
        print(json.dumps({row["setting"]: {k: v for k, v in row.items() if k != "setting"} for row in rows}))
        return 0
    from rich.table import Table

    from raybatch.terminal import console

    table = Table(title="settings (flag > environment > .env > file > default)")
    for column in ("env", "value", "from"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["env"], row["value"], row["from"])
    console.print(table)
    return 0
