"""Python's cycle collector in raybatch's processes (``raybatch.collector``)."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from raybatch import collector
from raybatch.collector import SELDOM, seldom, settle

PROBE = "import gc, json, raybatch\nprint(json.dumps(gc.get_threshold()))"


def _thresholds_after_import(script: Path) -> list[int]:
    script.write_text(PROBE)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[-1])


def test_a_ray_worker_collects_seldom_from_its_first_import_of_raybatch(tmp_path: Path) -> None:
    # Ray starts every worker as ``python .../ray/_private/workers/default_worker.py``.
    assert _thresholds_after_import(tmp_path / "default_worker.py") == list(SELDOM)


def test_importing_raybatch_elsewhere_leaves_the_collector_as_it_was(tmp_path: Path) -> None:
    assert _thresholds_after_import(tmp_path / "notebook.py") == list(gc.get_threshold())


def test_a_run_collects_seldom_and_gives_its_caller_back_the_collector_it_had() -> None:
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    kept = [object() for _ in range(10)]  # made before the block: frozen within it, not after
    with seldom():
        assert gc.get_threshold() == SELDOM
        assert gc.get_freeze_count() > frozen + len(kept) - 1
    assert (gc.get_threshold(), gc.get_freeze_count()) == (before, frozen)


def test_a_freeze_made_by_the_caller_stays_theirs() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with seldom():
            pass
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_a_worker_settles_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collector, "_settled", [])
    freezes: list[int] = []
    monkeypatch.setattr(gc, "freeze", lambda: freezes.append(1))
    settle()
    settle()
    assert freezes == [1]
