"""Other sources and stores on local Ray: real damaged PDFs, S3 in and out, PostgreSQL, the writer budget."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from pipeline_support import CorpusRun, corpus_subset, run_settings, warm_settings

from raybatch.claude.emulator import EmulatorServer
from raybatch.ids import OutputKeys
from raybatch.models import JobStatus
from raybatch.objects import open_store
from raybatch.pipeline import run
from raybatch.report import evaluate_run
from raybatch.settings import StateSettings, StoreSettings
from raybatch.state import open_state
from raybatch.work.writer import WriteReport

pytestmark = [pytest.mark.ray, pytest.mark.slow]

QPDF = Path(__file__).resolve().parents[1] / "data" / "qpdf"  # real damaged and encrypted PDFs


def peak_overlap(writes: list[WriteReport]) -> list[tuple[float, int]]:
    """(source MB held, writes running) at the start of each write, from the writers' own clocks."""
    peaks = []
    for write in writes:
        running = [w for w in writes if w.started <= write.started < w.ended]
        peaks.append((sum(w.source_mb for w in running), len(running)))
    return peaks


def test_writers_hold_at_most_the_budget(
    corpus_run: CorpusRun, emulator: EmulatorServer, tmp_path: Path
) -> None:
    """Six bundles of 0.6-1.6 MB through four writers with a 2 MB budget."""
    files = sorted(b["file"] for b in corpus_run.truth["bundles"])
    truth = corpus_subset(corpus_run, files, tmp_path / "in")
    settings = warm_settings(
        corpus_run, tmp_path / "home", emulator, max_concurrent_mb=2, result_workers=4, writer_grow_seconds=0
    )
    report = run(settings, str(tmp_path / "in"))
    assert report.ok
    assert len(report.writes) == len(files)
    for held, running in peak_overlap(report.writes):
        assert held <= 2 or running == 1, (held, running)
    assert evaluate_run(open_state(settings.section(StateSettings)), truth)["boundary_f1"] == 1.0


def test_every_qpdf_file_ends_completed_or_failed_with_a_reason(
    ray_session: None, emulator: EmulatorServer, tmp_path: Path
) -> None:
    folder = tmp_path / "qpdf"
    shutil.copytree(QPDF, folder)
    settings = run_settings(tmp_path / "home", emulator, ocr_engine="none")
    report = run(settings, str(folder))
    statuses = {j.status for j in report.jobs}
    assert statuses <= {JobStatus.COMPLETED, JobStatus.FAILED}
    failed = [j for j in report.jobs if j.status is JobStatus.FAILED]
    assert all(j.error_message and j.error_class for j in failed)
    completed = [j for j in report.jobs if j.status is JobStatus.COMPLETED]
    assert len(completed) >= 80  # PyMuPDF renders 94 of them; duplicates by content are one job
    assert {Path(f).name for f in report.skipped} == {"LICENSE.txt", "README.md"}


def test_s3_source_s3_store_and_postgresql(
    corpus_run: CorpusRun, emulator: EmulatorServer, s3_server, postgres_url: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    import sqlalchemy as sa

    schema = f"run_{tmp_path.name[-20:].replace('-', '_').lower()}"
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    db_url = sa.engine.make_url(postgres_url).update_query_dict({"options": f"-csearch_path={schema}"})
    inputs, outputs = s3_server.new_bucket("in"), s3_server.new_bucket("out")
    client = s3_server.client()
    truth = corpus_subset(corpus_run, ["bundle_003.pdf"], tmp_path / "in")
    data = (tmp_path / "in" / "bundle_003.pdf").read_bytes()
    client.put_object(inputs, "scans/Q1 2024/bundle_003.pdf", io.BytesIO(data), len(data))
    store = s3_server.store_settings(outputs, "results")
    settings = run_settings(
        tmp_path / "home",
        emulator,
        database_url=db_url.render_as_string(hide_password=False),
        store=store.store,
        s3_endpoint=store.s3_endpoint,
        s3_access_key=store.s3_access_key,
        s3_secret_key=store.s3_secret_key.get_secret_value() if store.s3_secret_key else None,
        s3_secure=False,
        s3_region=store.s3_region,
        ocr_engine="none",
    )
    try:
        report = run(settings, f"s3://{inputs}/scans/")
        assert report.ok
        state = open_state(settings.section(StateSettings))
        rows = state.list_documents()
        outputs = OutputKeys(state.database_id())
        keys = set(open_store(settings.section(StoreSettings)).list(f"{outputs.root}/"))
        assert {k for d in rows for k in (d.pdf_key, d.thumb_key, d.text_key)} <= keys
        assert outputs.manifest(report.jobs[0].id) in keys
        assert evaluate_run(state, truth)["documents_found"] == len(rows) > 0
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()
