"""Two runs at once on one source and one database, on local Ray: one coordinator serves both,
each chunk goes to Claude once, each document is written once."""

from __future__ import annotations

from pathlib import Path

import pytest
from pipeline_support import CorpusRun, corpus_subset, warm_settings
from test_run_recovery import Background, assert_written_once, state_of

from raybatch.claude.emulator import EmulatorServer

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_two_drivers_on_one_source_send_each_chunk_once(
    corpus_run: CorpusRun, emulator: EmulatorServer, tmp_path: Path
) -> None:
    truth = corpus_subset(corpus_run, ["bundle_000.pdf"], tmp_path / "in")
    settings = warm_settings(corpus_run, tmp_path / "home", emulator)
    runs = [Background(settings, str(tmp_path / "in")) for _ in range(2)]
    reports = [run.join() for run in runs]

    assert all(report.ok for report in reports)
    assert_written_once(settings, truth, emulator)  # requests sent == chunks, batches all ours
    assert len(state_of(settings).live_coordinators()) == 1  # one coordinator served both drivers
