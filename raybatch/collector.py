"""Python's cycle collector in raybatch's processes: seldom, and never again over what they imported.

Python looks for reference cycles every 700 new container objects, and its older passes walk every
object alive. A raybatch process holds a few hundred thousand objects from its imports (Ray,
PyMuPDF, SQLAlchemy, pydantic, the Claude SDK) and makes and drops many small ones a job: the
coordinator spent a fifth of its start's CPU in the collector (0.3 of 1.9 s), and in a run of 2,000
small files the coordinator and the driver about 0.3 and 0.15 ms a job (``docs/benchmarks.md``).
Collected every ``SELDOM[0]`` new objects instead, at most that many in cycles wait for a pass.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SELDOM = (50_000, 20, 20)  # new objects between young passes; young passes a middle one; middle an old
_settled: list[bool] = []


def in_ray_worker() -> bool:
    """Whether this process is a Ray worker (one that imports raybatch runs raybatch's work)."""
    return os.path.basename(sys.argv[0] if sys.argv else "") == "default_worker.py"


def collect_seldom() -> None:
    """Collect cycles every ``SELDOM[0]`` new objects in this process from now on."""
    gc.set_threshold(*SELDOM)


def settle() -> None:
    """Once a process: what it holds now (its imports, its ports) is never walked again by the
    collector (``gc.freeze``). Called when a worker's start is over, before its first piece of work."""
    if not _settled:
        _settled.append(True)
        gc.freeze()


class _Driving:
    """The blocks inside ``seldom`` in this process (runs may overlap, in threads), and what the
    first found: the last to leave gives it back."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inside = 0
        self.before = gc.get_threshold()
        self.ours = False


_DRIVING = _Driving()


@contextmanager
def seldom() -> Iterator[None]:
    """Collect seldom, and never over what this process held before, within the block: a driver
    runs in its caller's process, whose collector is as it was once the last block is left."""
    with _DRIVING.lock:
        if not _DRIVING.inside:
            # Another's freeze stays theirs.
            _DRIVING.before, _DRIVING.ours = gc.get_threshold(), not gc.get_freeze_count()
            if _DRIVING.ours:
                gc.freeze()
            gc.set_threshold(*SELDOM)
        _DRIVING.inside += 1
    try:
        yield
    finally:
        with _DRIVING.lock:
            _DRIVING.inside -= 1
            if not _DRIVING.inside:
                gc.set_threshold(*_DRIVING.before)
                if _DRIVING.ours:
                    gc.unfreeze()
