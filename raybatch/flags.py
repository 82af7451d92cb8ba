"""Command-line flags derived from the settings: a command names the settings it takes, and each
flag's name, type, choices, help (the field's description, environment name and default) and the
way back into the settings come from the field itself."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from enum import Enum
from typing import Any, get_args

from pydantic.fields import FieldInfo

from raybatch.settings import Settings
from raybatch.settings_sources import env_name

# Flags not spelled as their setting (``--batch-size`` for ``batch_size`` needs no entry here).
FLAG_NAMES = {
    "database_url": "--db",
    "processing_mode": "--mode",
    "page_modality": "--modality",
    "raybatch_emulator": "--emulator",
}


def flag_name(setting: str) -> str:
    """The flag that sets ``setting``."""
    return FLAG_NAMES.get(setting, "--" + setting.replace("_", "-"))


def add_setting_flags(
    parser: argparse.ArgumentParser, settings: Iterable[str], *, default: Any = None
) -> None:
    """One flag per named setting, its value stored under the setting's name (None when not given)."""
    for name in settings:
        field = Settings.model_fields[name]
        kind = _kind(field)
        options: dict[str, Any] = {"dest": name, "default": default, "help": _help(name, field)}
        if kind is bool:
            options["action"] = "store_true"
        elif issubclass(kind, Enum):
            options["choices"] = [member.value for member in kind]
        else:
            options.update(type=kind if kind in (int, float) else str, metavar=name.upper())
        parser.add_argument(flag_name(name), **options)


def setting_overrides(args: argparse.Namespace, settings: Iterable[str]) -> dict[str, Any]:
    """The settings given as flags in ``args``; a flag left out leaves its setting to the environment."""
    return {name: value for name in settings if (value := getattr(args, name, None)) is not None}


def _kind(field: FieldInfo) -> type:
    """The field's type without ``| None``."""
    kinds = [kind for kind in get_args(field.annotation) or (field.annotation,) if kind is not type(None)]
    return kinds[0] if isinstance(kinds[0], type) else str


def _help(name: str, field: FieldInfo) -> str:
    default = field.default.value if isinstance(field.default, Enum) else field.default
    shown = "" if default is None or default is False or str(default) == "" else f", default {default}"
    about = f"{field.description} " if field.description else ""
    return f"{about}({env_name(name)}{shown})".replace("%", "%%")
