"""Table: documents as rows of a fixed schema, with their text and where they came from."""

from __future__ import annotations

import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raybatch.models import ChunkRecord, ChunkStatus, DocumentRecord, JobRecord, JobStatus, SourceKind
from raybatch.steps import table as table_module
from raybatch.steps.table import SCHEMA, JobRows, Provenance, documents_table, read_table_files

WRITTEN = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)


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
            text_key=f"jobs/{job_id}/documents/{i}.txt",
        )
        for i in range(count)
    ]


def _chunk(job_id: int, n: int, first: int, last: int, *, emulated: bool) -> ChunkRecord:
    return ChunkRecord(
        job_id, n, first, last, f"job_{job_id}_batch_{n}", f"key{n}", ChunkStatus.SUCCEEDED, emulated=emulated
    )


def rows(job_id: int, count: int, written: datetime.datetime = WRITTEN) -> JobRows:
    """A job's rows as one write makes them."""
    chunks = [_chunk(job_id, 0, 1, 8, emulated=True), _chunk(job_id, 1, 9, 16, emulated=False)]
    made = Provenance(written_at=written, model="claude-x", prompt_version="p7")
    texts = {i: f"текст {i}" for i in range(count)}
    return JobRows(_job(job_id), _docs(job_id, count), made, chunks, texts)


def _read(data: bytes) -> pa.Table:
    [(table, _)] = read_table_files(data)
    return table


def test_round_trip_keeps_every_column() -> None:
    table = _read(documents_table([rows(7, 3)]))
    assert table.schema == SCHEMA
    got = table.to_pylist()
    assert [r["index"] for r in got] == [0, 1, 2]
    first = got[0]
    assert (first["job_id"], first["sha256"], first["source_name"]) == (7, f"{7:064x}", "скан 7.pdf")
    assert (first["first_page"], first["last_page"], first["pages"]) == (1, 2, 2)
    assert first["date_value"] == datetime.date(2024, 3, 1)
    assert got[2]["date"] == "3 марта 2024" and got[2]["date_value"] is None
    assert first["fields"] == [("a", "1"), ("b", "2")]
    assert first["group_key"] == "g_0123456789abcdef"
    assert first["text"] == "текст 0" and first["text_key"] == "jobs/7/documents/0.txt"


def test_every_row_says_where_it_came_from() -> None:
    got = _read(documents_table([rows(7, 5)])).to_pylist()
    first, last = got[0], got[4]  # pages 1-2 (chunk 0), pages 9-10 (chunk 1)
    assert (first["model"], first["prompt_version"], first["source_uri"]) == ("claude-x", "p7", "/in/7.pdf")
    assert first["written_at"] == WRITTEN and first["classes_sha256"] is None
    assert first["processing_keys"] == ["key0"] and first["emulated"] is True
    assert last["processing_keys"] == ["key1"] and last["emulated"] is False


def test_a_group_of_jobs_is_one_file_in_job_and_index_order() -> None:
    group = [rows(9, 1), rows(3, 2)]
    table = _read(documents_table(group))
    assert list(zip(table["job_id"].to_pylist(), table["index"].to_pylist(), strict=True)) == [
        (3, 0),
        (3, 1),
        (9, 0),
    ]
    assert documents_table(list(reversed(group))) == documents_table(group)  # stable bytes


def test_documents_of_another_job_are_refused() -> None:
    with pytest.raises(ValueError, match="belong to the job"):
        JobRows(_job(2), _docs(1, 1), Provenance(written_at=WRITTEN))


def test_an_empty_group_writes_an_empty_file() -> None:
    table = _read(documents_table([rows(5, 0)]))
    assert table.num_rows == 0 and table.schema == SCHEMA
    assert read_table_files([]) == []


def test_paths_buffers_and_files_all_read(tmp_path: Path) -> None:
    path = tmp_path / "part.parquet"
    path.write_bytes(documents_table([rows(1, 2)]))
    data = path.read_bytes()
    with path.open("rb") as handle:
        tables = [
            t for source in (path, str(path), pa.py_buffer(data), handle) for t, _ in read_table_files(source)
        ]
    assert all(t.equals(tables[0]) for t in tables)


def test_an_older_file_without_a_column_still_reads() -> None:
    import io

    import pyarrow.parquet as pq

    old = pa.table({"job_id": pa.array([9], pa.int64()), "index": pa.array([0], pa.int32())})
    out = io.BytesIO()
    pq.write_table(old, out)
    got = _read(out.getvalue()).to_pylist()
    assert got[0]["job_id"] == 9 and got[0]["counterparty"] is None and got[0]["written_at"] is None


def _codecs(data: bytes) -> set[str]:
    meta = pq.ParquetFile(pa.BufferReader(data)).metadata
    return {meta.row_group(0).column(c).compression for c in range(meta.num_columns)}


def test_a_group_of_a_few_rows_is_snappy_and_a_big_table_zstd(monkeypatch: pytest.MonkeyPatch) -> None:
    """zstd's context for each column costs more than it saves on a few rows (the files are read
    again at the run's end, to be compacted); a compacted table's big files are zstd."""
    assert _codecs(documents_table([rows(1, 2)])) == {"SNAPPY"}
    monkeypatch.setattr(table_module, "ZSTD_FROM_BYTES", 1)
    assert _codecs(documents_table([rows(1, 2)])) == {"ZSTD"}
    assert _pairs_read(documents_table([rows(1, 2)])) == [(1, 0), (1, 1)]


def _pairs_read(data: bytes) -> list[tuple[int, int]]:
    table = _read(data)
    return list(zip(table["job_id"].to_pylist(), table["index"].to_pylist(), strict=True))
