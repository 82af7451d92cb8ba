"""A prepare worker keeps one preparer per settings: a change to any setting it reads builds a new one."""

from __future__ import annotations

from typing import Any

import pytest

from raybatch.settings import PrepareTaskSettings, load_settings
from raybatch.shells import tasks


def _task_settings(**changed: Any) -> PrepareTaskSettings:
    return load_settings(ocr_engine="none", **changed).for_prepare_tasks()


@pytest.fixture(autouse=True)
def fresh_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks, "_WORKER_CACHE", {})


def test_same_settings_reuse_the_preparer() -> None:
    assert tasks._preparer(_task_settings()) is tasks._preparer(_task_settings())


@pytest.mark.parametrize(
    "changed",
    [
        {"page_modality": "images"},
        {"image_format": "webp"},
        {"image_quality": 60},
        {"page_long_edge": 1024},
        {"max_page_pixels": 2_000_000},
        {"ocr_min_confidence": 0.5},
        {"ocr_languages": "eng"},
        {"vision_batch_pages": 4},
        {"claude_model": "claude-other"},
        {"max_tokens": 8000},
    ],
)
def test_a_changed_setting_gives_a_new_preparer(changed: dict[str, Any]) -> None:
    before = tasks._preparer(_task_settings())
    after = tasks._preparer(_task_settings(**changed))
    assert after is not before
    assert tasks._preparer(_task_settings()) is before  # the old settings still find theirs
