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

PROBE = "\n".join(
    [
        "import gc, json",
        "before = gc.get_threshold()",
        "import raybatch",
        "print(json.dumps([before, gc.get_threshold()]))",
    ]
)


def _thresholds_around_import(script: Path) -> list[list[int]]:
    """The collector's thresholds before and after ``import raybatch`` in a process running ``script``."""
    script.write_text(PROBE)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[-1])


def test_a_ray_worker_collects_seldom_from_its_first_import_of_raybatch(tmp_path: Path) -> None:
    # Ray starts every worker as ``python .../ray/_private/workers/default_worker.py``.
    assert _thresholds_around_import(tmp_path / "default_worker.py")[1] == list(SELDOM)


def test_importing_raybatch_elsewhere_leaves_the_collector_as_it_was(tmp_path: Path) -> None:
    before, after = _thresholds_around_import(tmp_path / "notebook.py")
    assert after == before != list(SELDOM)


def test_a_run_collects_seldom_and_gives_its_caller_back_the_collector_it_had() -> None:
    gc.unfreeze()  # as in a caller that froze nothing
    before = gc.get_threshold()
    with seldom():
        assert gc.get_threshold() == SELDOM
        assert gc.get_freeze_count() > 0  # what the caller held before the block
    assert (gc.get_threshold(), gc.get_freeze_count()) == (before, 0)


def test_runs_that_overlap_give_the_collector_back_when_the_last_one_ends() -> None:
    before = gc.get_threshold()
    first, second = seldom(), seldom()  # two runs in threads: the first ends before the second
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold() == SELDOM
    second.__exit__(None, None, None)
    assert gc.get_threshold() == before


def test_a_freeze_made_by_the_caller_stays_theirs() -> None:
    gc.freeze()
    try:
        with seldom():
            pass
        assert gc.get_freeze_count() > 0  # not unfrozen (objects frozen may die meanwhile)
    finally:
        gc.unfreeze()


def test_a_worker_settles_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collector, "_settled", [])
    freezes: list[int] = []
    monkeypatch.setattr(gc, "freeze", lambda: freezes.append(1))
    settle()
    settle()
    assert freezes == [1]
