"""Two runs that end together on one database compact the documents table one after the other."""

from __future__ import annotations

import threading
from contextlib import closing
from pathlib import Path

from pipeline_support import run_settings
from test_table_sink import START, _rows

from raybatch.compaction import LEASE, compact_table
from raybatch.ids import OutputKeys
from raybatch.models import SourceKind
from raybatch.objects import open_store
from raybatch.settings import Settings, StateSettings, StoreSettings
from raybatch.state import open_state
from raybatch.steps.table_files import read_documents_table
from raybatch.work.table_sink import TableSink


def _table(settings: Settings, jobs: int) -> TableSink:
    """A table of a file per job, 3 rows each, of jobs in the database (rows of jobs gone are dropped)."""
    with closing(open_state(settings.section(StateSettings))) as state:
        sink = TableSink(open_store(settings.section(StoreSettings)), OutputKeys(state.database_id()))
        for n in range(jobs):
            job, _ = state.register_job(
                sha256=f"{n:064x}",
                source_uri=f"file:///{n}.pdf",
                source_name=f"{n}.pdf",
                kind=SourceKind.PDF,
                size_bytes=1,
            )
            sink.append([_rows(job.id, 3, START)])
    return sink


def _rows_in(settings: Settings, sink: TableSink) -> int:
    folder = Path(settings.raybatch_home) / "store" / sink.files()[0].rsplit("/", 1)[0]
    return read_documents_table(folder).num_rows


def test_runs_ending_together_compact_in_turn_and_every_row_stays_once(tmp_path: Path) -> None:
    settings = run_settings(tmp_path / "home")
    sink = _table(settings, 40)
    failures: list[BaseException] = []

    def end_of_a_run() -> None:
        try:
            with closing(open_state(settings.section(StateSettings))) as state:
                compact_table(settings, state)
        except BaseException as exc:  # the test reports it
            failures.append(exc)

    runs = [threading.Thread(target=end_of_a_run) for _ in range(4)]
    for thread in runs:
        thread.start()
    for thread in runs:
        thread.join()
    assert failures == []
    assert len(sink.files()) == 1
    assert _rows_in(settings, sink) == 120


def test_a_run_waits_for_the_compaction_another_holds_then_leaves_its_files(tmp_path: Path) -> None:
    settings = run_settings(tmp_path / "home")
    sink = _table(settings, 4)
    notices: list[str] = []
    with closing(open_state(settings.section(StateSettings))) as state:
        assert state.take_lease(LEASE, "another-run", 60)
        done = compact_table(settings, state, notices.append, patience=0.6)
        assert (done.merged, len(sink.files())) == (0, 4)
        assert "another run still compacts" in notices[0]
        state.give_up_lease(LEASE, "another-run")
        assert compact_table(settings, state).merged == 4
        assert state.take_lease(LEASE, "another-run", 60)  # the compaction gave its lease up
    assert _rows_in(settings, sink) == 12
