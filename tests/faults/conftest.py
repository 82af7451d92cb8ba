"""The fault suite uses the pipeline tests' builders; its emulator and SQLite state store are the
shared ``emulator`` and ``state`` fixtures."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "pipeline"))  # builders.py, pipeline_support.py
