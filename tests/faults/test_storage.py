"""Object-store and database errors inside a writer, injected at the port boundary: the job waits and
is written again, never failed for a blip; the rerun writes each document once."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from fault_support import FlakyState
from test_writer import answered_job, write_once

from raybatch.errors import StorageUnavailable
from raybatch.ids import OutputKeys, sha256_bytes
from raybatch.models import JobStatus
from raybatch.objects import MemoryObjectStore
from raybatch.samples import write_samples
from raybatch.state import SqlStateStore


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("corpus")
    return folder, write_samples(folder, bundles=1, seed=7)


def test_a_storage_outage_while_writing_sends_the_job_back(state: SqlStateStore, corpus) -> None:  # type: ignore[no-untyped-def]
    folder, truth = corpus
    store = MemoryObjectStore()
    job_id = answered_job(state, folder, truth["bundles"][0])
    store.fail_next(*[StorageUnavailable("S3 answered 503 (injected)")] * 50)

    report = write_once(state, store, job_id)

    assert report.status is JobStatus.ANSWERED and "StorageUnavailable" in (report.error or "")
    assert state.get_job(job_id).status is JobStatus.ANSWERED
    store._failures.clear()  # the outage ends
    assert write_once(state, store, job_id).status is JobStatus.COMPLETED
    rows = state.list_documents(job_id)
    assert len(rows) == len(truth["bundles"][0]["documents"])
    prefix = OutputKeys(state.database_id()).job_prefix(job_id)
    pdfs = [k for k in store.list(f"{prefix}/documents/") if k.endswith(".pdf")]
    assert sorted(pdfs) == sorted(d.pdf_key for d in rows), "one PDF per row"


def test_a_database_error_while_writing_sends_the_job_back(state: SqlStateStore, corpus) -> None:  # type: ignore[no-untyped-def]
    folder, truth = corpus
    store = MemoryObjectStore()
    job_id = answered_job(state, folder, truth["bundles"][0])
    flaky = FlakyState(state)
    flaky.fail["upsert_documents_of"] = 1

    report = write_once(flaky, store, job_id)  # type: ignore[arg-type]

    assert report.status is JobStatus.ANSWERED, report.error
    assert write_once(state, store, job_id).status is JobStatus.COMPLETED
    assert len(state.list_documents(job_id)) == len(truth["bundles"][0]["documents"])


def _s3_away_for(s3_server, bucket: str, seconds: float):  # type: ignore[no-untyped-def]
    """Store settings for an S3 endpoint that refuses connections for ``seconds``, then serves the
    session server's data (moto keeps it in-process); and the timer that brings it back."""
    import socket
    import threading

    from moto.server import ThreadedMotoServer

    with socket.socket() as probe:  # a port nothing listens on yet: the endpoint is away
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    away = replace(s3_server, endpoint=f"127.0.0.1:{port}").store_settings(bucket)
    back = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    timer = threading.Timer(seconds, back.start)
    timer.start()
    return away.model_copy(update={"store_outage_budget": 30.0}), timer, back


def test_an_s3_outage_during_registration_is_waited_out(s3_server, corpus) -> None:  # type: ignore[no-untyped-def]
    """The S3 endpoint refuses connections for a while as a file is inspected: the inspection waits
    (STORE_OUTAGE_BUDGET) and the file registers with its real hash and pages, not as unreadable."""
    import io

    from raybatch.register import inspect_source
    from raybatch.sources import list_sources

    folder, _ = corpus
    pdf = next(folder.glob("*.pdf")).read_bytes()
    bucket = s3_server.new_bucket()
    s3_server.client().put_object(bucket, "in/a.pdf", io.BytesIO(pdf), len(pdf))
    (source,) = list_sources(f"s3://{bucket}/in/", s3_server.store_settings(bucket)).files
    away, timer, back = _s3_away_for(s3_server, bucket, 4.0)  # longer than the S3 client's own tries
    try:
        inspection = inspect_source(source, away, 10**8)
    finally:
        timer.join()
        back.stop()
    assert inspection.problem is None, inspection.problem
    assert inspection.sha256 == sha256_bytes(pdf) and inspection.pages


def test_an_s3_outage_as_a_writer_reads_its_source_is_waited_out(
    state: SqlStateStore, s3_server, corpus
) -> None:  # type: ignore[no-untyped-def]
    """The writer's read of an S3 source waits the outage out: the job is written, not parked."""
    import io

    folder, truth = corpus
    bundle = truth["bundles"][0]
    pdf = (folder / bundle["file"]).read_bytes()
    bucket = s3_server.new_bucket()
    s3_server.client().put_object(bucket, "in/a.pdf", io.BytesIO(pdf), len(pdf))
    job_id = answered_job(state, folder, bundle, uri=f"s3://{bucket}/in/a.pdf")
    away, timer, back = _s3_away_for(s3_server, bucket, 4.0)
    try:
        report = write_once(state, MemoryObjectStore(), job_id, sources=away)
    finally:
        timer.join()
        back.stop()
    assert report.status is JobStatus.COMPLETED, report.error
