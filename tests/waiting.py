"""The one polling helper of the tests: wait for a condition, fail with what was awaited."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(
    condition: Callable[[], object], timeout: float = 120.0, what: str = "condition", interval: float = 0.2
) -> None:
    """Poll ``condition`` until it is true; AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
