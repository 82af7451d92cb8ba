"""A write call carrying several jobs, its writer SIGKILLed midway on local Ray: no job of the call
was completed or appended to the table, each goes again alone, and every job ends written once."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import pytest
import ray
from group_support import answered_file_job, assert_written_once, table_rows
from pipeline_support import run_settings
from test_coordinator_kills import session_processes
from waiting import wait_for

from raybatch.ids import OutputKeys
from raybatch.loops.writer_pool import WriterPool
from raybatch.models import JobStatus
from raybatch.objects import LocalObjectStore
from raybatch.settings import StateSettings
from raybatch.shells.writers import start_writers
from raybatch.state import open_state
from raybatch.work.upload_pool import BATCH_DOCUMENTS

pytestmark = [pytest.mark.ray, pytest.mark.slow]
# The third job is slow to write: the kill lands while it is written. Its first documents go in the
# call's first upload batch with jobs 1 and 2, so once job 2's objects show, about a hundred of its
# documents are still to build, not a handful a loaded machine would finish before the kill.
PAGES = [1, 1, BATCH_DOCUMENTS + 96, 1, 1]


def test_a_group_write_killed_midway_leaves_no_job_half_written_or_written_twice(
    ray_session: None, tmp_path: Path
) -> None:
    settings = run_settings(tmp_path / "home", result_workers=1)
    state = open_state(settings.section(StateSettings))
    store = LocalObjectStore(settings.store)
    keys = OutputKeys(state.database_id())
    (tmp_path / "in").mkdir()
    jobs = [answered_file_job(state, tmp_path / "in", n, pages) for n, pages in enumerate(PAGES)]
    [writer] = start_writers(settings, uuid.uuid4().hex[:8])
    ray.get(writer.__ray_ready__.remote())
    pool = WriterPool([writer], state, budget_mb=100, worker_id="test", lease_seconds=60, max_attempts=3)
    try:
        assert pool.admit(state.list_jobs([JobStatus.ANSWERED])) == jobs, "one call carries them all"
        # A call's manifests are put once all its jobs' objects are: job 2's objects mark the middle.
        wait_for(
            lambda: store.exists(keys.document_text(jobs[1], 0, 1)), interval=0.005, what="job 2's objects"
        )
        [pid] = session_processes("ray::WriterActor.write_group")
        os.kill(pid, signal.SIGKILL)
        assert not store.exists(keys.manifest(jobs[2])), "killed in the middle of the group"
        assert {state.get_job(j).status for j in jobs} == {JobStatus.WRITING}, "none completed"
        assert table_rows(store, keys) == [], "nor appended to the table"

        def all_ended() -> bool:
            pool.tick(state.list_jobs([JobStatus.ANSWERED]))
            if pool.refs:
                ray.wait(pool.refs, num_returns=1, timeout=0.5)
            return all(state.get_job(j).status.terminal for j in jobs) and not pool.busy

        wait_for(all_ended, interval=0.05, what="every job written")
    finally:
        ray.kill(writer)
    for job_id, pages in zip(jobs, PAGES, strict=True):
        assert_written_once(state, store, job_id, documents=pages)
    assert {state.get_job(j).attempts for j in jobs} == {2}, "the killed try counts, then one each"
    assert len(list(store.list(keys.documents_table))) == len(jobs), "after the death, each went alone"
