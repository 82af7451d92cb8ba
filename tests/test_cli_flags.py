"""The CLI's flags that set a setting: each reaches its setting, and says what it sets."""

from __future__ import annotations

from typing import Any

import pytest

from raybatch.cli import SETTING_FLAGS, _parser, main, settings_from
from raybatch.flags import flag_name
from raybatch.settings import Settings

# For every setting a command takes as a flag, a value other than its default: (words, as held).
GIVEN: dict[str, tuple[list[str], Any]] = {
    "database_url": (["sqlite:///elsewhere.db"], "sqlite:///elsewhere.db"),
    "store": (["s3://bucket/out"], "s3://bucket/out"),
    "processing_mode": (["sync"], "sync"),
    "result_workers": (["3"], 3),
    "max_concurrent_mb": (["512"], 512),
    "batch_size": (["7"], 7),
    "poll_interval": (["2.5"], 2.5),
    "ocr_engine": (["none"], "none"),
    "page_modality": (["text"], "text"),
    "raybatch_emulator": ([], True),
    "max_cost_usd": (["1.5"], 1.5),
    "max_daily_cost_usd": (["4"], 4.0),
    "split_mode": (["page"], "page"),
}
COMMAND_WORDS = {
    "run": ["run", "src"],
    "estimate": ["estimate", "src"],
    "eval": ["eval", "--truth", "truth.json"],
    "workload hold": ["workload", "hold", "x", "1"],
    "review": ["review", "list"],
    "redo": ["redo", "12:3"],
}


def held(settings: Settings, name: str) -> Any:
    value = getattr(settings, name)
    return value.get_secret_value() if name == "database_url" else value


@pytest.mark.parametrize(
    ("command", "setting"),
    [(command, name) for command, names in SETTING_FLAGS.items() for name in names]
    + [("workload hold", "database_url")],
)
def test_each_setting_flag_reaches_its_setting(command: str, setting: str) -> None:
    words, expected = GIVEN[setting]
    assert held(Settings(), setting) != expected

    args = _parser().parse_args([*COMMAND_WORDS.get(command, [command]), flag_name(setting), *words])

    assert held(settings_from(args), setting) == expected


def test_a_flag_left_out_leaves_the_setting_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATCH_SIZE", "9")
    monkeypatch.setenv("RAYBATCH_EMULATOR", "1")

    settings = settings_from(_parser().parse_args(["run", "src"]))

    assert settings.batch_size == 9 and settings.raybatch_emulator is True


def test_workload_hold_keeps_a_db_given_before_it() -> None:
    args = _parser().parse_args(["workload", "--db", "sqlite:///a.db", "hold", "x", "1"])

    assert settings_from(args).database_url.get_secret_value() == "sqlite:///a.db"


def test_help_says_the_setting_its_meaning_and_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])

    text = " ".join(capsys.readouterr().out.split())
    assert (
        "--batch-size BATCH_SIZE jobs waiting that make a batch due (one a POLL_INTERVAL); a pass sends"
        " all that wait"
        " (RAYBATCH_BATCH_SIZE, default 30)"
    ) in text
    assert (
        "--modality {images,adaptive,text} what a page is sent as (RAYBATCH_PAGE_MODALITY, default adaptive)"
        in text
    )


def test_a_flag_of_the_wrong_type_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        _parser().parse_args(["run", "src", "--batch-size", "many"])

    assert exit_.value.code == 2 and "--batch-size" in capsys.readouterr().err
