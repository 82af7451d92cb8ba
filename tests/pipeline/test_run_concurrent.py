"""Two runs at once on one source and one database, on local Ray: one coordinator serves both,
each chunk goes to Claude once, each document is written once; the coordinator outlives its
creator and exits once idle."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
import ray
from pipeline_support import CorpusRun, corpus_subset, run_settings, warm_settings
from test_run_recovery import Background, assert_written_once
from waiting import wait_for

from raybatch.claude.emulator import EmulatorServer
from raybatch.settings import Settings
from raybatch.shells.runtime import coordinator_name, get_coordinator

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


def test_the_coordinator_is_detached_and_exits_when_idle(
    ray_session: None, emulator: EmulatorServer, tmp_path: Path
) -> None:
    settings = run_settings(tmp_path, emulator, coordinator_idle_seconds=5.0)  # a slow machine stalls 1 s
    first = get_coordinator(settings)
    ray.get(first.snapshot.remote())
    del first  # the creating handle gone: a detached actor lives on
    gc.collect()
    again = ray.get_actor(coordinator_name(settings), namespace=settings.ray_namespace)
    assert ray.get(again.snapshot.remote()).running
    del again
    wait_for(lambda: not coordinator_alive(settings), timeout=60, what="the idle coordinator to exit")


def coordinator_alive(settings: Settings) -> bool:
    try:
        ray.get_actor(coordinator_name(settings), namespace=settings.ray_namespace)
    except ValueError:
        return False
    return True
