"""TableSink: one file per group write, compacted by size; every engine reads the folder exactly."""

from __future__ import annotations

import datetime
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from table_engines import engine_counts

from raybatch.classes.load import parse_classes, shipped_text
from raybatch.errors import LeaseLost
from raybatch.ids import OutputKeys
from raybatch.models import DocumentRecord, JobRecord, JobStatus, SourceKind
from raybatch.objects import LocalObjectStore
from raybatch.steps.table import SCHEMA, JobRows, Provenance
from raybatch.steps.table_files import read_documents_table
from raybatch.work.table_sink import TableSink, gone_jobs

KEYS = OutputKeys("cd" * 16)
START = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)


def _clock() -> Iterator[datetime.datetime]:
    at = START
    while True:
        at += datetime.timedelta(seconds=1)
        yield at


def _rows(job_id: int, count: int, at: datetime.datetime) -> JobRows:
    job = JobRecord(
        job_id, f"{job_id:064x}", f"/in/{job_id}.pdf", f"{job_id}.pdf", SourceKind.PDF, 1, JobStatus.WRITING
    )
    docs = [
        DocumentRecord(job_id, i, i + 1, i + 1, "letter", values={"title": f"doc {i}"}) for i in range(count)
    ]
    return JobRows(job, docs, Provenance(written_at=at), texts={i: "x" * 200 for i in range(count)})


class Table:
    """A sink over a local folder, with every engine's reading of it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = LocalObjectStore(root)
        self.clock = _clock()
        self.sink = TableSink(self.store, KEYS, now=lambda: next(self.clock))
        self.folder = root / KEYS.documents_table

    def write(self, *group: tuple[int, int]) -> None:
        at = next(self.clock)
        self.sink.append([_rows(job_id, count, at) for job_id, count in group])

    def compact(
        self,
        target_mb: float = 128,
        gone: frozenset[int] = frozenset(),
        hold: Callable[[], bool] = lambda: True,
    ) -> None:
        self.sink.compact(target_mb=target_mb, gone=lambda ids: gone & set(ids), hold=hold)

    def counts(self) -> dict[str, int]:
        """Rows as every engine reads the folder, and as raybatch reads it."""
        return {**engine_counts(self.folder), "raybatch": read_documents_table(self.folder).num_rows}


def _exactly(table: Table, rows: int) -> None:
    assert set(table.counts().values()) == {rows}, table.counts()


@pytest.fixture
def table(tmp_path: Path) -> Table:
    return Table(tmp_path)


def test_groups_append_files_and_compaction_leaves_one(table: Table) -> None:
    for first in range(1, 41, 4):
        table.write(*[(job_id, 2) for job_id in range(first, first + 4)])
    assert len(table.sink.files()) == 10
    _exactly(table, 80)
    table.compact()
    assert len(table.sink.files()) == 1
    _exactly(table, 80)
    before = table.sink.files()
    table.compact()
    assert table.sink.files() == before  # nothing to gain: nothing rewritten


def test_a_rewritten_job_replaces_its_rows_exactly_once(table: Table) -> None:
    table.write((1, 3), (2, 2))
    table.compact()
    table.write((1, 1))  # job 1 again (a correction, a changed request): one document now
    assert read_documents_table(table.folder).num_rows == 3  # the rule holds before compaction
    table.compact()
    _exactly(table, 3)
    rows = pq.read_table(table.folder).to_pylist()
    assert sorted((r["job_id"], r["index"]) for r in rows) == [(1, 0), (2, 0), (2, 1)]


def test_the_rows_of_jobs_gone_are_dropped(table: Table) -> None:
    table.write((1, 2), (2, 2), (3, 1))
    table.compact(gone=frozenset({2}))
    _exactly(table, 3)


def test_files_roll_by_size(table: Table) -> None:
    for job_id in range(1, 31):
        table.write((job_id, 10))  # 10 rows of ~1 KB in memory each
    table.compact(target_mb=0.05)
    files = table.sink.files()
    assert 3 <= len(files) <= 10
    _exactly(table, 300)
    assert pq.read_table(table.folder).schema.remove_metadata() == SCHEMA


def test_a_compaction_cut_off_before_its_deletes_is_finished_by_the_next(table: Table, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    table.write((1, 2))
    table.write((2, 2))
    monkeypatch.setattr(table.store, "delete", lambda key: None)  # killed after writing its files
    table.compact()
    assert len(table.sink.files()) == 3
    assert read_documents_table(table.folder).num_rows == 4  # each row once, even so
    monkeypatch.undo()
    table.compact()
    _exactly(table, 4)
    assert len(table.sink.files()) == 1


def test_a_compaction_that_loses_its_lease_leaves_the_table_as_it_was(table: Table) -> None:
    for job_id in range(1, 31):
        table.write((job_id, 10))
    before = table.sink.files()
    answers = iter([True, True, False])  # another run took the table after two files were written
    with pytest.raises(LeaseLost):
        table.compact(target_mb=0.05, hold=lambda: next(answers))
    assert table.sink.files() == before
    _exactly(table, 300)


def test_a_file_another_compaction_removed_after_the_listing_is_passed_over(
    table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    table.write((1, 2))
    table.write((2, 2))
    gone, kept = table.sink.files()
    listed = [gone, kept]
    table.store.delete(gone)
    monkeypatch.setattr(table.sink, "files", lambda: listed)
    table.compact()
    monkeypatch.undo()
    assert read_documents_table(table.folder).num_rows == 2


def test_a_compaction_under_another_classes_file_keeps_the_first_files_columns(table: Table) -> None:
    logistics = parse_classes(shipped_text("logistics"))
    shipped = TableSink(table.store, KEYS, now=lambda: next(table.clock), classes=logistics)
    bill = _rows(1, 1, next(table.clock))
    bill.documents[0] = replace(bill.documents[0], doc_type="bill_of_lading", values={"bl_number": "MSKU-1"})
    shipped.append([bill])
    table.write((2, 1))  # under the default classes file
    table.compact()  # under the default one too
    [key] = table.sink.files()
    rows = pq.read_table(table.root / key).to_pylist()
    assert [(r["job_id"], r["bill_of_lading_bl_number"], r["title"]) for r in rows] == [
        (1, "MSKU-1", None),
        (2, None, "doc 0"),
    ]


def test_the_one_file_per_job_layout_is_compacted_away(table: Table) -> None:
    legacy = table.folder / "job_id=7" / "part-0.parquet"
    legacy.parent.mkdir(parents=True)
    old = _rows(7, 2, START)
    pq.write_table(_legacy_table(old), legacy)
    table.write((8, 1))
    table.compact()
    assert all("job_id=" not in key for key in table.sink.files())
    _exactly(table, 3)


def _legacy_table(rows: JobRows):  # type: ignore[no-untyped-def]
    from raybatch.steps.table import rows_table

    return rows_table([rows]).drop_columns(["text", "written_at", "processing_keys"])


def test_gone_jobs_are_the_canceled_and_the_unknown() -> None:
    class State:
        def job_statuses(self, job_ids):  # type: ignore[no-untyped-def]
            known = {1: JobStatus.COMPLETED, 2: JobStatus.CANCELED, 3: JobStatus.ANSWERED}
            return {i: known[i] for i in job_ids if i in known}

    assert gone_jobs(State())([1, 2, 3, 4]) == {2, 4}


def test_a_runs_end_compacts_the_table_without_importing_pandas_or_pyarrow_compute(table: Table) -> None:
    """Compaction runs in the driver at a run's end, alone on the machine: pyarrow would import
    pandas (about 0.2 s) to ask whether a mask or a scalar it is handed is a pandas object."""
    table.write((1, 2), (2, 2))
    table.write((1, 1), (3, 1))  # job 1 rewritten: its older rows are dropped, the rest kept
    code = (
        "import sys\n"
        "from raybatch.ids import OutputKeys\n"
        "from raybatch.objects import LocalObjectStore\n"
        "from raybatch.work.table_sink import TableSink\n"
        f"sink = TableSink(LocalObjectStore({str(table.root)!r}), OutputKeys({KEYS.database_id!r}))\n"
        "done = sink.compact(target_mb=128, gone=lambda ids: set(), hold=lambda: True)\n"
        "print(done.merged, done.written, 'pandas' in sys.modules, 'pyarrow.compute' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["2", "1", "False", "False"]  # pyarrow.compute: 0.1 s of a run's end
    _exactly(table, 4)
