"""The whole job on the sample corpus: local Ray, SQLite, a local folder, the emulator via the real SDK."""

from __future__ import annotations

import json
from pathlib import Path

import pymupdf
import pytest
from pipeline_support import CorpusRun

from raybatch.ids import OutputKeys
from raybatch.models import JobStatus
from raybatch.pipeline import run
from raybatch.report import documents_by_file, evaluate_run
from raybatch.steps.render import text_layer
from raybatch.steps.table_files import read_documents_table

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_every_job_completes_and_the_split_is_exact(corpus_run: CorpusRun) -> None:
    assert corpus_run.report.ok
    assert {j.status for j in corpus_run.report.jobs} == {JobStatus.COMPLETED}
    figures = evaluate_run(corpus_run.state, corpus_run.truth)
    assert figures["boundary_f1"] == 1.0
    assert figures["type_accuracy"] == 1.0
    assert figures["documents_found"] == figures["documents_expected"] == 83


def test_every_document_has_its_pdf_thumbnail_row_and_manifest(corpus_run: CorpusRun) -> None:
    store, state = corpus_run.store, corpus_run.state
    rows = state.list_documents()
    expected = {k for d in rows for k in (d.pdf_key, d.thumb_key, d.text_key)}
    keys = OutputKeys(state.database_id())
    listed = {k for k in store.list(keys.jobs) if "/documents/" in k}
    assert listed == expected  # objects and rows agree: nothing missing, nothing extra
    for doc in rows:
        with pymupdf.open("pdf", store.get(doc.pdf_key)) as pdf:
            assert pdf.page_count == doc.last_page - doc.first_page + 1
        assert store.get(doc.thumb_key)[8:12] == b"WEBP"
    for job in corpus_run.report.jobs:
        manifest = json.loads(store.get(keys.manifest(job.id)))
        assert len(manifest["documents"]) == len(state.list_documents(job.id))
    table = read_documents_table(Path(corpus_run.settings.store) / keys.documents_table)
    assert table.num_rows == len(rows)


def test_documents_group_like_the_truth(corpus_run: CorpusRun) -> None:
    truth_groups = {frozenset(map(tuple, g["documents"])) for g in corpus_run.truth["groups"]}
    by_file = documents_by_file(corpus_run.state, corpus_run.report.jobs)
    found: dict[str, set[tuple[str, int]]] = {}
    for file, docs in by_file.items():
        for doc in docs:
            if doc.group_key:
                found.setdefault(doc.group_key, set()).add((file, doc.index))
    assert {frozenset(members) for members in found.values()} == truth_groups


def test_sliced_pages_are_upright(corpus_run: CorpusRun) -> None:
    """Rotated scans and rotated digital pages come out upright in their documents."""
    by_file = documents_by_file(corpus_run.state, corpus_run.report.jobs)
    checked = 0
    for bundle in corpus_run.truth["bundles"]:
        turns = {p["page"]: p["rotation"] for p in bundle["page_info"]}
        scanned = {p["page"] for p in bundle["page_info"] if p["scanned"]}
        for doc in by_file[bundle["file"]]:
            with pymupdf.open("pdf", corpus_run.store.get(doc.pdf_key)) as pdf:
                for offset, page in enumerate(pdf):
                    number = doc.first_page + offset
                    assert page.rotation == turns[number], (bundle["file"], number)
                    if number not in scanned and turns[number]:
                        # the content's own direction, turned by the page's /Rotate, reads left to right
                        assert (text_layer(page).rotation - page.rotation) % 360 == 0
                    checked += bool(turns[number])
    assert checked >= 20


def test_a_second_run_finds_the_same_jobs_and_rewrites_nothing_new(corpus_run: CorpusRun) -> None:
    before = sorted(corpus_run.store.list(""))
    rows = corpus_run.state.list_documents()
    again = run(corpus_run.settings, str(Path(corpus_run.settings.raybatch_home) / "samples"))
    assert [j.id for j in again.jobs] == [j.id for j in corpus_run.report.jobs]
    assert sorted(corpus_run.store.list("")) == before
    assert corpus_run.state.list_documents() == rows
