"""The CLI and settings references of the docs, made from the parser and the settings' fields, so the
docs cannot drift from the code (the docs site's hook puts them into its pages)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from enum import Enum

from pydantic import SecretStr

from raybatch.settings import Settings
from raybatch.settings_sources import env_name, legacy_names

_SECTIONS = [kind for kind in Settings.__mro__[1:] if "_Section" in [b.__name__ for b in kind.__mro__[1:]]]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[argparse.ArgumentParser, str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return {name: (sub, helps.get(name, "")) for name, sub in action.choices.items()}
    return {}


def _commands(
    parser: argparse.ArgumentParser, prefix: str
) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    for name, (sub, text) in _subcommands(parser).items():
        yield f"{prefix} {name}", sub, text
        yield from _commands(sub, f"{prefix} {name}")


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("%%", "%").replace("\n", " ")


def cli_markdown(parser: argparse.ArgumentParser) -> str:
    """Every command: its usage line, what it does, and a table of its arguments."""
    parts = []
    for name, sub, text in _commands(parser, parser.prog):
        usage = " ".join(sub.format_usage().removeprefix("usage: ").split())
        parts += [f"### `{name}`", "", _sentence(text), ""]
        parts += ["```", usage, "```", "", "| argument | meaning |", "| --- | --- |"]
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            shown = ", ".join(action.option_strings) or action.metavar or action.dest
            parts.append(f"| `{shown}` | {_cell(action.help)} |")
        parts.append("")
    return "\n".join(parts)


def settings_markdown() -> str:
    """Every setting by section: its environment name, default and meaning, and its older names."""
    parts = []
    seen: set[str] = set()
    for section in [*_SECTIONS, Settings]:
        own = [name for name in section.__annotations__ if name in Settings.model_fields and name not in seen]
        if not own:
            continue
        title = section.__name__.removesuffix("Settings") or "General"
        parts += [f"### {title}", "", (section.__doc__ or "").strip().splitlines()[0], ""]
        parts += ["| setting | default | meaning |", "| --- | --- | --- |"]
        for name in own:
            seen.add(name)
            info = Settings.model_fields[name]
            old = ", ".join(f"`{n}`" for n in legacy_names(name, info))
            meaning = _cell(info.description) + (f" (formerly {old})" if old else "")
            parts.append(f"| `{env_name(name)}` | {_default(info.default)} | {meaning} |")
        parts.append("")
    return "\n".join(parts)


def _default(value: object) -> str:
    if isinstance(value, SecretStr):
        return ""
    if isinstance(value, Enum):
        value = value.value
    return "" if value in (None, "") else f"`{value}`"


def _sentence(text: str) -> str:
    text = _cell(text)
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
