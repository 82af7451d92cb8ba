"""A prepare worker keeps one preparer per settings: a change to any setting it reads builds a new one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymupdf
import pytest

from raybatch.errors import RaybatchError
from raybatch.ids import sha256_file
from raybatch.models import JobRecord, JobStatus, SourceKind
from raybatch.settings import PrepareTaskSettings, StoreSettings, load_settings
from raybatch.shells import tasks
from raybatch.steps.chunk import plan_chunks

PREPARING = JobStatus.PREPARING


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


def test_a_group_task_prepares_each_file_and_a_broken_one_fails_alone(tmp_path: Path) -> None:
    good = tmp_path / "good.pdf"
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "INVOICE No. 1", fontsize=14)
    doc.save(good)
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.7 not really")
    jobs = [
        JobRecord(
            n, sha256_file(path), path.as_uri(), path.name, SourceKind.PDF, path.stat().st_size, PREPARING
        )
        for n, path in ((1, good), (2, bad))
    ]
    settings = load_settings(ocr_engine="none")
    items = [(job, plan_chunks(1)[0]) for job in jobs]
    store = tasks.keyless(settings.section(StoreSettings))
    outcomes, *chunks = tasks.prepare_chunks._function(settings.for_prepare_tasks(), store, items, [(), ()])
    assert outcomes[0].record.job_id == 1 and chunks[0].request.custom_id == outcomes[0].record.custom_id
    assert isinstance(outcomes[1], RaybatchError) and chunks[1] is None
