"""Table files: a job's newest write is its current rows; compaction rewrites small and unclean files."""

from __future__ import annotations

import datetime
import io

import pyarrow as pa
import pyarrow.parquet as pq
from test_table import WRITTEN, rows

from raybatch.steps.table import documents_table
from raybatch.steps.table_files import (
    OLDEST,
    SLICED_RUNS,
    FileFacts,
    file_facts,
    file_metadata,
    file_name,
    plan_compaction,
    read_documents_table,
    written_jobs,
)

LATER = WRITTEN + datetime.timedelta(minutes=5)
MB = 1024 * 1024


def _file(*group: object) -> bytes:
    jobs = list(group)
    return documents_table(jobs, metadata=file_metadata(written_jobs(jobs)))  # type: ignore[arg-type]


def _pairs(table: pa.Table) -> list[tuple[int, int]]:
    return list(zip(table["job_id"].to_pylist(), table["index"].to_pylist(), strict=True))


def test_file_names_sort_by_write_time() -> None:
    first, second = file_name(WRITTEN, "ffff"), file_name(LATER, "0000")
    assert first == "part-20261201T120000000000Z-ffff.parquet" and first < second


def test_a_rewritten_job_keeps_only_its_newest_rows() -> None:
    old = _file(rows(1, 3), rows(2, 2))
    new = _file(rows(1, 1, LATER))  # job 1 written again, now one document
    assert _pairs(read_documents_table([old, new])) == [(1, 0), (2, 0), (2, 1)]
    assert _pairs(read_documents_table([new, old])) == [(1, 0), (2, 0), (2, 1)]  # order of files: no matter


def test_rows_come_in_job_and_index_order_from_few_runs_or_many() -> None:
    few = [_file(rows(3, 2), rows(7, 1)), _file(rows(1, 2)), _file(rows(5, 3), rows(6, 1))]
    assert _pairs(read_documents_table(few)) == sorted(_pairs(read_documents_table(list(reversed(few)))))
    assert [job for job, _ in _pairs(read_documents_table(few))] == [1, 1, 3, 3, 5, 5, 5, 6, 7]
    many = [_file(rows(job, 2)) for job in range(SLICED_RUNS + 6, 0, -1)]  # each a run of its own
    in_order = [(job, i) for job in range(1, SLICED_RUNS + 7) for i in (0, 1)]
    assert _pairs(read_documents_table(many)) == in_order


def test_a_job_rewritten_without_documents_has_none() -> None:
    old, new = _file(rows(1, 3), rows(2, 1)), _file(rows(1, 0, LATER))
    assert _pairs(read_documents_table([old, new])) == [(2, 0)]


def test_two_copies_of_one_write_read_once() -> None:
    data = _file(rows(1, 2))
    assert _pairs(read_documents_table([data, data])) == [(1, 0), (1, 1)]


def test_a_file_of_the_one_file_per_job_layout_is_older_than_any_write() -> None:
    legacy = io.BytesIO()
    pq.write_table(
        pa.table({"job_id": pa.array([1, 1, 5], pa.int64()), "index": pa.array([0, 1, 0], pa.int32())}),
        legacy,
    )
    facts = file_facts("old", legacy.getvalue())
    assert facts.legacy and facts.jobs == {1: OLDEST, 5: OLDEST}
    assert _pairs(read_documents_table([legacy.getvalue(), _file(rows(1, 1))])) == [(1, 0), (5, 0)]


def test_facts_come_from_the_footer() -> None:
    facts = file_facts("k", _file(rows(3, 2), rows(4, 0, LATER)))
    assert facts.jobs == {3: WRITTEN, 4: LATER} and not facts.legacy


def _facts(key: str, size_mb: float, **jobs: datetime.datetime) -> FileFacts:
    return FileFacts(key, int(size_mb * MB), {int(k[1:]): at for k, at in jobs.items()})


def test_one_clean_file_or_big_clean_files_stay() -> None:
    assert plan_compaction([_facts("a", 1, j1=WRITTEN)], 128 * MB, ()) == []
    big = [_facts("a", 100, j1=WRITTEN), _facts("b", 90, j2=WRITTEN)]
    assert plan_compaction(big, 128 * MB, ()) == []


def test_small_files_merge() -> None:
    small = [_facts(f"f{n}", 0.1, **{f"j{n}": WRITTEN}) for n in range(5)]
    assert [f.key for f in plan_compaction(small, 128 * MB, ())] == [f"f{n}" for n in range(5)]


def test_superseded_gone_and_copied_rows_make_a_file_unclean() -> None:
    big_old = _facts("a", 100, j1=WRITTEN, j2=WRITTEN)
    big_new = _facts("b", 100, j1=LATER)
    assert [f.key for f in plan_compaction([big_old, big_new], 128 * MB, ())] == ["a"]
    assert [f.key for f in plan_compaction([big_new], 128 * MB, {1})] == ["b"]
    copy = _facts("c", 100, j1=LATER)
    assert [f.key for f in plan_compaction([big_new, copy], 128 * MB, ())] == ["c"]
