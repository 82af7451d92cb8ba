"""A whole run leaves no API key and no page text in its output, its logs, its database or objects."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.samples import write_samples

pytestmark = [pytest.mark.ray, pytest.mark.slow]

API_KEY = "raybatch-test-key-3f9c1e-not-a-real-one"


@pytest.fixture
def ray_tmp() -> Iterator[Path]:
    """A short folder for the run's own Ray (unix socket paths must stay short)."""
    folder = Path(tempfile.mkdtemp(prefix="rbs", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def every_file(*folders: Path) -> Iterator[Path]:
    for folder in folders:
        yield from (p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def test_no_key_and_no_page_text_anywhere(tmp_path: Path, ray_tmp: Path) -> None:
    truth = write_samples(tmp_path / "in", bundles=1, seed=11)
    page_phrases = ["Перечисленные ниже услуги", "The goods shall be accompanied", "Заказчик претензий"]
    counterparties = {d["counterparty"] for b in truth["bundles"] for d in b["documents"]}
    with EmulatorServer(EmulatorConfig(api_key=API_KEY, processing_seconds=0.2)) as emulator:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")},
            "ANTHROPIC_API_KEY": API_KEY,
            "ANTHROPIC_BASE_URL": emulator.base_url,
            "OCR_ENGINE": "none",
            "POLL_INTERVAL": "0.5",
            "RAY_TMPDIR": str(ray_tmp),
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_AUTH_MODE": "disabled",
        }
        home = tmp_path / "home"
        command = [sys.executable, "-m", "raybatch.cli", "-v", "run", str(tmp_path / "in"), "--quiet"]
        command += [
            "--no-dashboard",
            "--db",
            f"sqlite:///{home / 'state.db'}",
            "--store",
            str(home / "store"),
        ]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    logs = [p for p in every_file(ray_tmp) if p.suffix in {".log", ".out", ".err"}]
    assert len(logs) > 10  # the run's own Ray wrote its logs where we look
    outputs = [done.stdout, done.stderr, *(p.read_bytes().decode("utf-8", "replace") for p in logs)]
    stored = [p.read_bytes() for p in every_file(home)]
    assert not any(API_KEY in text for text in outputs), "the key reached a log"
    assert not any(API_KEY.encode() in data for data in stored), "the key reached the database or a store"
    for phrase in page_phrases:
        assert not any(phrase in text for text in outputs), f"page text reached a log: {phrase}"
    assert counterparties  # fields are stored (rows, manifests), but never logged
    assert not any(name in text for name in counterparties for text in outputs)
