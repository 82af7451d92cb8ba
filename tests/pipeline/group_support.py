"""Answered jobs of small generated PDFs, for the tests of grouped writes (with and without Ray)."""

from __future__ import annotations

from pathlib import Path

import pymupdf

from raybatch.claude.answer import ChunkAnswer
from raybatch.ids import OutputKeys, custom_id, sha256_file
from raybatch.models import ChunkRecord, ChunkStatus, JobStatus, SourceKind
from raybatch.objects.port import ObjectStore
from raybatch.state import SqlStateStore
from raybatch.steps.table_files import read_documents_table


def one_document_pdf(path: Path, n: int, pages: int = 1) -> Path:
    """A PDF of ``pages`` pages with a text layer, different for each ``n``."""
    doc = pymupdf.open()
    for page in range(pages):
        doc.new_page().insert_text((72, 72), f"INVOICE No. {n:06d} page {page + 1}", fontsize=14)
    doc.save(path)
    doc.close()
    return path


def answer(pages: int, n: int, first: int = 1) -> str:
    """A chunk answer: one document per page, of pages ``first`` to ``first + pages - 1``."""
    numbers = range(first, first + pages)
    documents = [
        {"first_page": p, "last_page": p, "type": "invoice", "counterparty": f"Supplier {n % 3}",
         "reference": f"C-{n % 3}", "title": "Invoice", "date": "2024-01-01", "number": f"{n}-{p}",
         "amount": 100.0 + n, "currency": "EUR", "fields": []}
        for p in numbers
    ]  # fmt: skip
    rotations = [{"page": p, "rotation": 0} for p in numbers]
    body = {"first_continues_previous": False, "last_continues_next": False, "documents": documents}
    return ChunkAnswer.model_validate({**body, "pages": rotations}).model_dump_json()


def answered_file_job(state: SqlStateStore, folder: Path, n: int, pages: int = 1) -> int:
    """A job for a new PDF whose one chunk (up to 8 pages) holds its answer, ready for a writer."""
    path = one_document_pdf(folder / f"file_{n}.pdf", n, pages)
    job, _ = state.register_job(
        sha256=sha256_file(path),
        source_uri=path.as_uri(),
        source_name=path.name,
        kind=SourceKind.PDF,
        size_bytes=path.stat().st_size,
    )
    chunk = ChunkRecord(
        job.id, 0, 1, pages, custom_id(job.id, 0), "k", ChunkStatus.SUCCEEDED,
        answer=answer(pages, n), input_tokens=100, output_tokens=10,
    )  # fmt: skip
    state.save_chunks(job.id, [chunk])
    state.transition(job.id, [JobStatus.PENDING], JobStatus.ANSWERED, pages=pages)
    return job.id


def table_rows(store: ObjectStore, keys: OutputKeys) -> list[dict]:
    """The documents table's current rows (each job's newest write)."""
    return read_documents_table([store.get(k) for k in store.list(keys.documents_table)]).to_pylist()


def assert_written_once(state: SqlStateStore, store: ObjectStore, job_id: int, documents: int) -> None:
    """The job is complete with exactly its documents: one row, one PDF, thumbnail and text each,
    nothing else under its documents, its manifest, and its documents once in the table."""
    keys = OutputKeys(state.database_id())
    assert state.get_job(job_id).status is JobStatus.COMPLETED
    rows = state.list_documents(job_id)
    assert [d.index for d in rows] == list(range(documents))
    expected = {k for d in rows for k in (d.pdf_key, d.thumb_key, d.text_key)}
    found = {k for k in store.list(f"{keys.job_prefix(job_id)}/documents/")}
    assert found == expected
    assert store.exists(keys.manifest(job_id))
    in_table = [(r["index"], r["pdf_key"]) for r in table_rows(store, keys) if r["job_id"] == job_id]
    assert in_table == [(d.index, d.pdf_key) for d in rows]
