"""Where settings come from: flags > environment (then ``.env``) > ``raybatch.toml`` > defaults.

raybatch's own settings are read as ``RAYBATCH_<NAME>`` (``RAYBATCH_MAX_TOKENS``), upper case only;
settings owned by another tool keep their owner's name (``ANTHROPIC_API_KEY``, ``RAY_ADDRESS``,
``AWS_REGION``, ``GOOGLE_APPLICATION_CREDENTIALS``). The unprefixed names of earlier versions
(``MAX_TOKENS``) still work, with one deprecation line each. An unknown ``RAYBATCH_*`` name, or an
unknown key in the file, stops with the nearest known name: a misspelt setting is never dropped.
"""

from __future__ import annotations

import difflib
import logging
import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from raybatch.errors import ConfigError

log = logging.getLogger(__name__)

PREFIX = "RAYBATCH_"
CONFIG_FILE = "raybatch.toml"
OWNED_PREFIXES = ("anthropic_", "google_", "ray_", "aws_")  # names that belong to another tool
# Variables named RAYBATCH_* that are not settings: the test suite's own.
NOT_SETTINGS = ("RAYBATCH_TEST_",)

_warned: set[str] = set()


def env_name(field: str) -> str:
    """The environment name of a setting: its owner's name, or ``RAYBATCH_`` + its name."""
    upper = field.upper()
    if field.startswith(OWNED_PREFIXES) or upper.startswith(PREFIX):
        return upper
    return PREFIX + upper


def legacy_names(field: str, info: FieldInfo) -> tuple[str, ...]:
    """Older environment names still read for a setting (deprecated)."""
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    declared = tuple(str(name) for name in extra.get("legacy_env", ()))  # type: ignore[union-attr]
    own = () if env_name(field) == field.upper() else (field.upper(),)
    return own + declared


@dataclass(frozen=True)
class Origin:
    """Where one setting's value came from, for ``raybatch config``."""

    kind: str  # "flag", "environment", ".env", "file", "default"
    name: str = ""  # the variable or the file

    def __str__(self) -> str:
        return f"{self.kind} {self.name}".strip()


class RaybatchSources:
    """Reads the environment, ``.env`` and the config file for one ``Settings`` class."""

    def __init__(self, fields: Mapping[str, FieldInfo], config_file: Path | None) -> None:
        self.fields = fields
        self.config_file = config_file
        self.origins: dict[str, Origin] = {}

    def environment(self) -> dict[str, Any]:
        """Values from the process environment, then ``.env`` beneath it."""
        values = self._from_environ(_dotenv(Path(".env")), ".env")
        values.update(self._from_environ(os.environ, "environment"))
        return values

    def _from_environ(self, environ: Mapping[str, str], kind: str) -> dict[str, Any]:
        check_unknown(environ, self.fields, kind)
        values: dict[str, Any] = {}
        for field, info in self.fields.items():
            name = env_name(field)
            if name in environ:
                values[field], self.origins[field] = environ[name], Origin(kind, name)
                continue
            for old in legacy_names(field, info):
                if old in environ:
                    _deprecated(old, name)
                    values[field], self.origins[field] = environ[old], Origin(kind, old)
                    break
        return values

    def file(self) -> dict[str, Any]:
        """Values from the TOML config file (``--config FILE``, or ``raybatch.toml`` here if present)."""
        path = self.config_file or (Path(CONFIG_FILE) if Path(CONFIG_FILE).is_file() else None)
        if path is None:
            return {}
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the config file ({exc.strerror or exc})") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML ({exc})") from None
        data = data.get("raybatch", data)  # a [raybatch] table, or keys at the top
        for key in data:
            if key not in self.fields:
                raise ConfigError(f"{path}: unknown setting {key!r}{_did_you_mean(key, self.fields)}")
        for key in data:  # the environment's values win over the file's
            self.origins.setdefault(key, Origin("file", str(path)))
        return dict(data)


def check_unknown(environ: Mapping[str, str], fields: Iterable[str], kind: str) -> None:
    """Stop at a ``RAYBATCH_*`` name that is no setting, naming the nearest one."""
    known = {env_name(field) for field in fields}
    for name in environ:
        if name.startswith(PREFIX) and name not in known and not name.startswith(NOT_SETTINGS):
            raise ConfigError(f"unknown setting {name} ({kind}){_did_you_mean(name, known)}")


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f": did you mean {close[0]}?" if close else ""


def _deprecated(old: str, new: str) -> None:
    if old not in _warned:
        _warned.add(old)
        log.warning("the setting %s is deprecated: use %s", old, new)


def _dotenv(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    from dotenv import dotenv_values

    return {key: value for key, value in dotenv_values(path).items() if value is not None}


class _Dict(PydanticBaseSettingsSource):
    """A settings source over values already read."""

    def __init__(self, settings_cls: type[BaseSettings], values: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self.values = values

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self.values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.values)


def sources_for(settings_cls: type[BaseSettings], reader: RaybatchSources) -> tuple[_Dict, _Dict]:
    """The environment's and the file's sources, in that order of precedence."""
    return _Dict(settings_cls, reader.environment()), _Dict(settings_cls, reader.file())
