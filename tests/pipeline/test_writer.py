"""ResultWriter without Ray: documents, thumbnails, rows, groups, manifest and table from answers."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pymupdf
import pytest
from PIL import Image, ImageChops
from writing import answered_job as answered
from writing import claim_answered

from raybatch.classes import classes_digest, default_classes
from raybatch.claude.answer import ChunkAnswer
from raybatch.ids import OutputKeys
from raybatch.models import ChunkRecord, ChunkStatus, JobStatus, PageText, Usage, ocr_origin
from raybatch.objects import MemoryObjectStore
from raybatch.samples import write_samples
from raybatch.settings import ClaudeSettings, OutputSettings, PrepareSettings, StateSettings, StoreSettings
from raybatch.state import SqlStateStore, open_state
from raybatch.steps import open_source
from raybatch.steps.table_files import read_documents_table
from raybatch.steps.thumbnail import thumbnail
from raybatch.work.writer import ResultWriter, WriteReport, documents_at_once, page_rotations

MB = 1024 * 1024


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("corpus")
    return folder, write_samples(folder, bundles=2, seed=7)


def answered_job(state: SqlStateStore, folder: Path, bundle: dict, uri: str | None = None) -> int:
    """A job whose chunks hold the truth's answers (1,000 tokens in and 100 out each), ready for a
    writer (its source read from ``uri`` when given, else from the folder)."""
    return answered(state, folder, bundle, uri=uri, usage=Usage(input_tokens=1000, output_tokens=100))


def write(state: SqlStateStore, store: MemoryObjectStore, job_id: int, **outputs: object) -> None:
    report = write_once(state, store, job_id, **outputs)
    assert report.status is JobStatus.COMPLETED, report.error


def write_once(
    state: SqlStateStore,
    store: MemoryObjectStore,
    job_id: int,
    sources: StoreSettings | None = None,
    **outputs: object,
) -> WriteReport:
    """Claim an answered job and write it, as a writer actor would."""
    writer = ResultWriter(
        state,
        store,
        sources=sources or StoreSettings(),
        prepare=PrepareSettings(),
        claude=ClaudeSettings(),
        outputs=OutputSettings.model_validate(outputs),
    )
    return writer.write(claim_answered(state, job_id))


def same_picture(webp: bytes, other: bytes) -> bool:
    """Two thumbnails of one page: the same size, and their pixels about the same."""
    one, two = (Image.open(io.BytesIO(data)).convert("L") for data in (webp, other))
    if one.size != two.size:
        return False
    histogram = ImageChops.difference(one, two).histogram()  # how many pixels differ by 0..255
    mean = sum(level * count for level, count in enumerate(histogram)) / sum(histogram)
    return mean < 4  # of 255: the codec's loss, not another drawing


def test_a_job_becomes_documents_rows_groups_manifest_and_table(tmp_path: Path, corpus) -> None:  # type: ignore[no-untyped-def]
    folder, truth = corpus
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
    store = MemoryObjectStore()
    jobs = [answered_job(state, folder, bundle) for bundle in truth["bundles"]]
    for job_id in jobs:
        write(state, store, job_id)
    for job_id, bundle in zip(jobs, truth["bundles"], strict=True):
        rows = state.list_documents(job_id)
        assert [(d.first_page, d.last_page, d.doc_type) for d in rows] == [
            (d["first_page"], d["last_page"], d["type"]) for d in bundle["documents"]
        ]
        for row, expected in zip(rows, bundle["documents"], strict=True):
            with pymupdf.open("pdf", store.get(row.pdf_key)) as pdf:
                turns = [p.rotation for p in pdf]
            pages = range(expected["first_page"], expected["last_page"] + 1)
            assert turns == [bundle["page_info"][p - 1]["rotation"] for p in pages]
            assert store.head(row.pdf_key).metadata["source-name"] == bundle["file"]
            assert same_picture(store.get(row.thumb_key), thumbnail(store.get(row.pdf_key)))
        manifest = json.loads(store.get(OutputKeys(state.database_id()).manifest(job_id)))
        assert [d["index"] for d in manifest["documents"]] == [d.index for d in rows]
        assert manifest["estimated_cost_usd"] > 0
    grouped = {d.group_key for d in state.list_documents() if d.group_key}
    assert len(grouped) >= 2
    keys = OutputKeys(state.database_id())
    parts = [store.get(key) for key in store.list(keys.documents_table)]
    assert len(parts) == len(jobs)  # one file per write (a writer call), until compaction
    table = read_documents_table(parts)
    assert table.num_rows == len(state.list_documents())
    for row, doc in zip(table.to_pylist(), state.list_documents(), strict=True):
        assert (row["job_id"], row["index"], row["text_key"]) == (doc.job_id, doc.index, doc.text_key)
        assert row["text"] == store.get(doc.text_key).decode()  # the text object and the column agree
        assert (
            row["classes_sha256"]
            == state.get_job(doc.job_id).classes_sha
            == classes_digest(default_classes())
        )


@pytest.mark.parametrize("searchable", [True, False])
def test_scanned_pages_get_their_ocr_text_in_the_pdf_the_text_object_and_the_table(  # type: ignore[no-untyped-def]
    tmp_path: Path, corpus, searchable: bool
) -> None:
    folder, truth = corpus
    bundle = truth["bundles"][0]
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
    store = MemoryObjectStore()
    job_id = answered_job(state, folder, bundle)
    sha256 = state.get_job(job_id).sha256
    scanned = [p["page"] for p in bundle["page_info"] if p["scanned"]]
    for page in scanned:  # what preparing read, kept in the per-page cache
        state.put_page_text(
            sha256, "tess-1", PageText(page, f"Scanword{page} Ромашка", ocr_origin("tess-1"), 0.9)
        )
    write(state, store, job_id, searchable_pdf=searchable)
    keys = OutputKeys(state.database_id())
    rows = read_documents_table([store.get(k) for k in store.list(keys.documents_table)]).to_pylist()
    for doc in state.list_documents(job_id):
        pages = [p for p in scanned if doc.first_page <= p <= doc.last_page]
        with pymupdf.open("pdf", store.get(doc.pdf_key)) as pdf:
            layer = "".join(page.get_text() for page in pdf)
        text = store.get(doc.text_key or "").decode()
        assert text == rows[doc.index]["text"] and text.count("\f") == doc.last_page - doc.first_page
        for page in pages:
            assert f"Scanword{page} Ромашка" in text
            assert (f"Scanword{page}" in layer) is searchable
    assert any(doc.first_page <= scanned[0] <= doc.last_page for doc in state.list_documents(job_id))


def test_writing_again_rewrites_the_same_keys_and_drops_stale_ones(tmp_path: Path, corpus) -> None:  # type: ignore[no-untyped-def]
    folder, truth = corpus
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
    store = MemoryObjectStore()
    job_id = answered_job(state, folder, truth["bundles"][0])
    write(state, store, job_id)
    keys = OutputKeys(state.database_id())
    first = {k: store.get(k) for k in store.list(keys.jobs)}
    rows = state.list_documents(job_id)
    state.transition(job_id, [JobStatus.COMPLETED], JobStatus.ANSWERED)
    write(state, store, job_id)
    assert {k: store.get(k) for k in store.list(keys.jobs)} == first  # same keys, same bytes
    assert state.list_documents(job_id) == rows
    tables = [store.get(k) for k in store.list(keys.documents_table)]
    assert len(tables) == 2  # the second write appended its own file: its rows supersede the first's
    assert read_documents_table(tables).num_rows == len(rows)
    stale = f"{keys.job_prefix(job_id)}/documents/99.pdf"
    store.put(stale, b"left by an older answer")
    ahead = keys.prepared_request(job_id, 0)  # what an ``estimate`` prepared: answered now
    store.put(ahead, b"{}")
    state.transition(job_id, [JobStatus.COMPLETED], JobStatus.ANSWERED)
    write(state, store, job_id)
    left = set(store.list(""))
    assert stale not in left and ahead not in left
    assert set(first) <= left  # the documents and the manifest stay


def test_the_writer_does_not_check_pages_registering_checked_already(  # type: ignore[no-untyped-def]
    tmp_path: Path, corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, truth = corpus
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
    job_id = answered_job(state, folder, truth["bundles"][0])

    def checked_again(*args: object, **kwargs: object) -> None:
        raise AssertionError("the pages of a registered source were checked again")

    monkeypatch.setattr(open_source, "check_pages", checked_again)
    write(state, MemoryObjectStore(), job_id)
    assert state.list_documents(job_id)


def test_two_databases_on_one_store_keep_their_outputs_apart(tmp_path: Path, corpus) -> None:  # type: ignore[no-untyped-def]
    folder, truth = corpus
    store = MemoryObjectStore()
    first = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'first.db'}"))
    second = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'second.db'}"))
    job_a = answered_job(first, folder, truth["bundles"][0])
    job_b = answered_job(second, folder, truth["bundles"][1])
    assert job_a == job_b == 1  # ids restart in every database
    write(first, store, job_a)
    written_by_first = {k: store.get(k) for k in store.list("")}
    write(second, store, job_b)
    assert all(store.get(k) == data for k, data in written_by_first.items())  # nothing overwritten
    roots = {OutputKeys(db.database_id()).root for db in (first, second)}
    assert len(roots) == 2 and {k.split("/")[0] for k in store.list("")} == roots
    # A rewrite of the first database's job (with fewer documents) deletes nothing of the second's.
    written_by_second = {k: store.get(k) for k in store.list("") if k not in written_by_first}
    first.transition(job_a, [JobStatus.COMPLETED], JobStatus.ANSWERED)
    chunks = first.get_chunks(job_a)  # another answer: a new processing key replaces the old one
    first.save_chunks(job_a, [replace(c, answer=_one_document(c.answer), processing_key="2") for c in chunks])
    write(first, store, job_a)
    assert len(first.list_documents(job_a)) < len(truth["bundles"][0]["documents"])
    assert all(store.get(k) == data for k, data in written_by_second.items())
    for db, job_id in ((first, job_a), (second, job_b)):
        for doc in db.list_documents(job_id):
            assert doc.pdf_key.startswith(OutputKeys(db.database_id()).root + "/")
            assert store.exists(doc.pdf_key)


def _one_document(answer: str | None) -> str:
    """The chunk's answer with all its pages as one document."""
    parsed = ChunkAnswer.model_validate_json(answer or "")
    merged = parsed.documents[0].model_copy(update={"last_page": parsed.documents[-1].last_page})
    return parsed.model_copy(update={"documents": [merged]}).model_dump_json()


def _same_pages_other_bytes(data: bytes) -> bytes:
    with pymupdf.open("pdf", data) as doc:
        doc.set_metadata({"title": "another file"})
        return doc.tobytes()


@pytest.mark.parametrize("replacement", ["other pages", "same page count"])
def test_a_source_that_changed_fails_its_job(tmp_path: Path, corpus, replacement: str) -> None:  # type: ignore[no-untyped-def]
    folder, truth = corpus
    copy = tmp_path / "moved"
    copy.mkdir()
    bundle = truth["bundles"][1]
    original = (folder / bundle["file"]).read_bytes()
    (copy / bundle["file"]).write_bytes(original)
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
    job_id = answered_job(state, copy, bundle)
    if replacement == "other pages":
        new = (folder / "bundle_000.pdf").read_bytes()
    else:
        new = _same_pages_other_bytes(original)
        with pymupdf.open("pdf", new) as doc:
            assert doc.page_count == bundle["pages"]
    (copy / bundle["file"]).write_bytes(new)
    store = MemoryObjectStore()
    report = write_once(state, store, job_id)
    assert report.status is JobStatus.FAILED
    assert (state.get_job(job_id).error_message or "").startswith("changed: the file's bytes are no longer")
    assert list(store.list("")) == []  # nothing sliced from the new bytes


@pytest.mark.parametrize(("size_mb", "at_once"), [(0.5, 4), (19.9, 4), (20, 2), (50, 2), (50.1, 1), (900, 1)])
def test_documents_at_once_by_source_size(size_mb: float, at_once: int) -> None:
    assert documents_at_once(int(size_mb * MB)) == at_once


def test_page_rotations_add_what_preparing_found_and_what_claude_saw() -> None:
    from raybatch.steps.stitch import StitchedDocument

    chunk = ChunkRecord(
        1, 0, 1, 3, "job_1_batch_0", "k", ChunkStatus.SUCCEEDED, rotations={1: 90, 2: 0, 3: 180}
    )
    doc = StitchedDocument(1, 3, "invoice", rotations={1: 0, 2: 270, 3: 180})  # type: ignore[arg-type]
    assert page_rotations([chunk], [doc]) == {1: 90, 2: 270, 3: 0}
