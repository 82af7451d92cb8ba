"""The emulator served as its own process (``raybatch emulator --faults JSON``), as a user runs it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from raybatch.claude.emulator.api import ANSWERS_PATH


@contextmanager
def emulator_process(faults: Mapping[str, Any], *, processing_seconds: float = 0.3) -> Iterator[str]:
    """Start ``raybatch emulator`` on a free port with these fault knobs; yields its base URL."""
    command = [
        sys.executable, "-m", "raybatch.cli", "emulator", "--port", "0",
        "--processing-seconds", str(processing_seconds), "--faults", json.dumps(dict(faults)),
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env={**os.environ})
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "listening on" in line, f"the emulator did not start: {line!r}"
        yield line.rsplit(" ", 1)[-1].strip()
    finally:
        os.kill(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def paid_answers(base_url: str) -> dict[str, int]:
    """Succeeded answers per custom_id, as the emulator process counted them."""
    with urllib.request.urlopen(base_url + ANSWERS_PATH, timeout=10) as reply:
        return {str(k): int(v) for k, v in json.load(reply).items()}
