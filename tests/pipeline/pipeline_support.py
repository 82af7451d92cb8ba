"""Helpers of the pipeline tests: settings for one run, a warm OCR cache, parts of the corpus."""

from __future__ import annotations

import re
import shutil
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raybatch.claude.emulator import EmulatorServer
from raybatch.objects import LocalObjectStore
from raybatch.pipeline import RunReport
from raybatch.settings import Settings, StateSettings, load_settings
from raybatch.state import SqlStateStore, open_state


def run_settings(home: Path, emulator: EmulatorServer | None = None, **overrides: Any) -> Settings:
    """Settings for one run in its own folder (SQLite + local store), pointed at ``emulator``."""
    values: dict[str, Any] = {
        "raybatch_home": str(home),
        "poll_interval": 0.5,
        "lease_seconds": 6.0,
        "coordinator_idle_seconds": 5.0,  # a test's coordinator does not outlive it for long
        "coordinator_lease_seconds": 3.0,
    }
    if emulator is not None:
        values |= {"anthropic_base_url": emulator.base_url, "anthropic_api_key": "test-key"}
    return load_settings(**(values | overrides))


def copy_ocr_cache(source_db: Path, target_db: Path) -> int:
    """Give a fresh state database the OCR results of an earlier run (same files, same pages)."""
    with sqlite3.connect(target_db) as conn:
        conn.execute("ATTACH DATABASE ? AS warm", (str(source_db),))
        count = conn.execute("INSERT OR IGNORE INTO page_ocr SELECT * FROM warm.page_ocr").rowcount
        conn.commit()
        conn.execute("DETACH DATABASE warm")
    return count


@dataclass
class CorpusRun:
    settings: Settings
    truth: dict
    report: RunReport
    state: SqlStateStore
    store: LocalObjectStore


def corpus_subset(corpus: CorpusRun, files: list[str], folder: Path) -> dict:
    """Some bundles of the session's corpus in ``folder`` (same bytes, so the OCR cache applies),
    and their truth."""
    folder.mkdir(parents=True, exist_ok=True)
    samples = Path(corpus.settings.raybatch_home) / "samples"
    for name in files:
        shutil.copyfile(samples / name, folder / name)
    bundles = [b for b in corpus.truth["bundles"] if b["file"] in files]
    return {**corpus.truth, "bundles": bundles, "groups": []}


def warm_settings(
    corpus: CorpusRun, home: Path, emulator: EmulatorServer | None = None, **overrides: Any
) -> Settings:
    """Run settings whose fresh database already holds the corpus run's OCR results."""
    settings = run_settings(home, emulator, **overrides)
    open_state(settings.section(StateSettings)).close()
    copy_ocr_cache(Path(corpus.settings.raybatch_home) / "state.db", home / "state.db")
    return settings


def chunk_answers(answers: Mapping[str, int]) -> dict[str, int]:
    """Paid answers per chunk custom_id: a batch request's id carries its database's mark, taken off
    here, so a chunk answered once in a batch and once by a sync call counts twice."""
    counts: dict[str, int] = {}
    for sent, n in answers.items():
        chunk = re.sub(r"-[0-9a-f]{8,12}$", "", sent)
        counts[chunk] = counts.get(chunk, 0) + n
    return counts
