"""Table: one Parquet file per job with a fixed schema; reruns replace a job's rows."""

from __future__ import annotations

import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from raybatch.ids import OutputKeys
from raybatch.models import DocumentRecord, JobRecord, JobStatus, SourceKind
from raybatch.steps.table import SCHEMA, documents_table, read_documents_table

KEYS = OutputKeys("ab" * 16)


def _job(job_id: int) -> JobRecord:
    return JobRecord(
        id=job_id,
        sha256=f"{job_id:064x}",
        source_uri=f"/in/{job_id}.pdf",
        source_name=f"скан {job_id}.pdf",
        kind=SourceKind.PDF,
        size_bytes=10,
        status=JobStatus.WRITING,
    )


def _docs(job_id: int, count: int) -> list[DocumentRecord]:
    return [
        DocumentRecord(
            job_id=job_id,
            index=i,
            first_page=2 * i + 1,
            last_page=2 * i + 2,
            doc_type="invoice",
            fields={"b": "2", "a": "1"},
            group_key="g_0123456789abcdef",
            values={
                "date": "2024-03-0" + str(i + 1) if i < 2 else "3 марта 2024",
                "amount": 100.0 * i,
                "counterparty": "ООО «Ромашка»",
            },
        )
        for i in range(count)
    ]


def _write(root: Path, job_id: int, count: int) -> None:
    path = root / KEYS.documents_table_part(job_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(documents_table(_docs(job_id, count), _job(job_id)))


def test_round_trip_keeps_every_column() -> None:
    table = read_documents_table(documents_table(_docs(7, 3), _job(7)))
    assert table.schema == SCHEMA
    rows = table.to_pylist()
    assert [r["index"] for r in rows] == [0, 1, 2]
    first = rows[0]
    assert (first["job_id"], first["sha256"], first["source_name"]) == (7, f"{7:064x}", "скан 7.pdf")
    assert (first["first_page"], first["last_page"], first["pages"]) == (1, 2, 2)
    assert first["date_value"] == datetime.date(2024, 3, 1)
    assert rows[2]["date"] == "3 марта 2024" and rows[2]["date_value"] is None
    assert first["fields"] == [("a", "1"), ("b", "2")]
    assert first["group_key"] == "g_0123456789abcdef"


def test_rows_in_index_order_and_bytes_stable() -> None:
    docs = _docs(3, 4)
    data = documents_table(docs, _job(3))
    assert documents_table(list(reversed(docs)), _job(3)) == data


def test_documents_of_another_job_are_refused() -> None:
    with pytest.raises(ValueError, match="belong to the job"):
        documents_table(_docs(1, 1), _job(2))


def test_without_job_the_source_columns_are_empty() -> None:
    rows = read_documents_table([documents_table(_docs(4, 1))]).to_pylist()
    assert rows[0]["sha256"] is None and rows[0]["job_id"] == 4


def test_empty_job_writes_an_empty_file() -> None:
    table = read_documents_table(documents_table([], _job(5)))
    assert table.num_rows == 0 and table.schema == SCHEMA
    assert read_documents_table([]).schema == SCHEMA


def test_rerun_replaces_the_job_rows(tmp_path: Path) -> None:
    _write(tmp_path, 1, 3)
    _write(tmp_path, 2, 2)
    _write(tmp_path, 1, 1)  # job 1 again, now with one document
    table = read_documents_table(tmp_path)
    assert sorted(zip(table["job_id"].to_pylist(), table["index"].to_pylist(), strict=True)) == [
        (1, 0),
        (2, 0),
        (2, 1),
    ]


def test_paths_buffers_and_files_all_read(tmp_path: Path) -> None:
    _write(tmp_path, 1, 2)
    path = tmp_path / KEYS.documents_table_part(1)
    data = path.read_bytes()
    with path.open("rb") as handle:
        tables = [
            read_documents_table(path),
            read_documents_table(str(path)),
            read_documents_table(pa.py_buffer(data)),
            read_documents_table(handle),
        ]
    assert all(t.equals(tables[0]) for t in tables)


def test_an_older_file_without_a_column_still_reads() -> None:
    import io

    import pyarrow.parquet as pq

    old = pa.table({"job_id": pa.array([9], pa.int64()), "index": pa.array([0], pa.int32())})
    out = io.BytesIO()
    pq.write_table(old, out)
    rows = read_documents_table(out.getvalue()).to_pylist()
    assert rows[0]["job_id"] == 9 and rows[0]["counterparty"] is None


def test_the_folder_reads_as_a_dataset(tmp_path: Path) -> None:
    _write(tmp_path, 1, 2)
    _write(tmp_path, 22, 1)
    root = tmp_path / KEYS.documents_table
    table = ds.dataset(root, format="parquet").to_table()
    assert sorted(table["job_id"].to_pylist()) == [1, 1, 22]
