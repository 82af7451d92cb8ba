"""Tests that need something the machine may lack: skipped locally, run (and so failing) under CI."""

from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def needs(available: bool, reason: str) -> pytest.MarkDecorator:
    """Skip when ``available`` is false, except under CI, where every requirement must be met."""
    return pytest.mark.skipif(not available and not IN_CI, reason=reason)


def missing_service(reason: str) -> None:
    """Skip locally; fail under CI, where every service must be there."""
    if IN_CI:
        pytest.fail(f"required service missing under CI: {reason}")
    pytest.skip(reason)
