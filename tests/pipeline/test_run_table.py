"""The documents table after real runs on local Ray: pyarrow and DuckDB read exact rows after
a run, a rerun and ``--force``; the run's files are compacted into one; scanned slices are searchable."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pymupdf
import pytest
from pipeline_support import CorpusRun, corpus_subset, warm_settings
from table_engines import engine_counts

from raybatch.claude.emulator import EmulatorServer
from raybatch.ids import OutputKeys
from raybatch.objects import LocalObjectStore
from raybatch.pipeline import run
from raybatch.settings import Settings, StateSettings
from raybatch.state import open_state

pytestmark = [pytest.mark.ray, pytest.mark.slow]

FILES = ["bundle_001.pdf", "bundle_004.pdf"]


def _table(settings: Settings) -> tuple[Path, list[str]]:
    state = open_state(settings.section(StateSettings))
    keys = OutputKeys(state.database_id())
    files = [k for k in LocalObjectStore(settings.store).list(keys.documents_table) if k.endswith(".parquet")]
    return Path(settings.store) / keys.documents_table, files


def test_a_run_a_rerun_and_force_read_exactly(
    corpus_run: CorpusRun, emulator: EmulatorServer, tmp_path: Path
) -> None:
    subset = corpus_subset(corpus_run, FILES, tmp_path / "in")
    documents = sum(len(b["documents"]) for b in subset["bundles"])
    settings = warm_settings(corpus_run, tmp_path / "home", emulator)
    state = open_state(settings.section(StateSettings))

    assert run(settings, str(tmp_path / "in")).ok
    folder, files = _table(settings)
    assert len(files) == 1  # the writers' files, compacted at the run's end
    assert set(engine_counts(folder).values()) == {documents} == {len(state.list_documents())}

    assert run(settings, str(tmp_path / "in")).ok  # the same files again: nothing new
    assert _table(settings)[1] == files
    assert set(engine_counts(folder).values()) == {documents}

    forced = run(settings, str(tmp_path / "in"), force=True)  # new jobs for the same files
    assert forced.ok and len(_table(settings)[1]) == 1
    assert set(engine_counts(folder).values()) == {2 * documents} == {len(state.list_documents())}
    rows = pq.read_table(folder).to_pylist()
    assert len({(r["job_id"], r["index"]) for r in rows}) == 2 * documents
    assert all(
        r["model"] and r["written_at"] and r["processing_keys"] and r["emulated"] is False for r in rows
    )


def test_scanned_pages_of_a_run_are_searchable(corpus_run: CorpusRun) -> None:
    """Where OCR read a scanned page, its slice holds that text; its text object too."""
    checked = 0
    for bundle in corpus_run.truth["bundles"]:
        scanned = {p["page"] for p in bundle["page_info"] if p["scanned"] and not p["blank"]}
        job = next(j for j in corpus_run.report.jobs if j.source_name == bundle["file"])
        for doc in corpus_run.state.list_documents(job.id):
            text = corpus_run.store.get(doc.text_key or "").decode()
            pages = text.split("\f")
            assert len(pages) == doc.last_page - doc.first_page + 1
            with pymupdf.open("pdf", corpus_run.store.get(doc.pdf_key or "")) as pdf:
                for offset, page in enumerate(pdf):
                    if doc.first_page + offset in scanned and pages[offset].split():
                        words = {w for w in pages[offset].split() if len(w) > 3}
                        assert words <= set(page.get_text().split()), (
                            bundle["file"],
                            doc.first_page + offset,
                        )
                        checked += 1
    assert checked >= 5
