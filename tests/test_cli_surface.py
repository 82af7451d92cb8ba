"""The CLI's surface: help on every argument, --json on every command that reports, -v anywhere."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator

import pytest

from raybatch.cli import _parser, main

# Commands that serve or run something else until stopped: nothing to report as one JSON object.
# review and classes: groups of commands.
NO_JSON = {"emulator", "workload hold", "demo", "serve", "completion", "review", "classes", "classes show"}


def commands(
    parser: argparse.ArgumentParser, prefix: str = ""
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every (sub)command's name and parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                full = f"{prefix} {name}".strip()
                yield full, sub
                yield from commands(sub, full)


def test_every_argument_of_every_command_has_help() -> None:
    missing = [
        f"{name}: {action.dest}"
        for name, sub in commands(_parser())
        for action in sub._actions
        if not isinstance(action, argparse._SubParsersAction | argparse._HelpAction) and not action.help
    ]
    assert missing == []


def test_every_reporting_command_takes_json() -> None:
    without = [
        name
        for name, sub in commands(_parser())
        if name not in NO_JSON and not any("--json" in a.option_strings for a in sub._actions)
    ]
    assert without == []


@pytest.mark.parametrize("where", [0, 1, 3])
def test_verbose_anywhere_on_the_line(where: int, db: str, state: object) -> None:
    words = ["status", "--db", db, "--json"]
    words.insert(where, "-v")
    assert main(words) == 0


def test_bash_completion_offers_commands_and_each_commands_flags(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import subprocess

    from raybatch.completion import bash_script

    script = tmp_path / "c.bash"
    script.write_text(bash_script(_parser()))

    def complete(*words: str) -> set[str]:
        line = " ".join(["raybatch", *words])
        probe = (
            f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words)}; _raybatch; "
            'printf "%s\\n" "${COMPREPLY[@]}"'
        )
        return set(
            subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True).stdout.split()
        )

    assert {"run", "status", "cancel", "config"} <= complete("")
    assert {"--force", "--db", "--emulator"} <= complete("run", "--")
    assert "--jobs" in complete("status", "--j")


def test_tables_are_plain_when_not_on_a_terminal(
    db: str, state: object, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "pending" in out
    assert not set(out) & set("┃┏━│─┡┩└┘╇")


def test_estimate_shows_only_flags_that_change_an_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    text = capsys.readouterr().out
    assert "--modality" in text and "--mode" in text
    for idle in (
        "--result-workers",
        "--max-concurrent-mb",
        "--batch-size",
        "--poll-interval",
        "--max-cost-usd",
    ):
        assert idle not in text


def test_no_color_is_kept() -> None:
    import os
    import subprocess

    probe = "from raybatch import terminal; print(terminal.console.no_color, terminal.errors.no_color)"
    env = {**os.environ, "NO_COLOR": "1"}
    shown = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert shown.stdout.split() == ["True", "True"]
