"""Object-store and database errors inside a writer, injected at the port boundary: the job waits and
is written again, never failed for a blip; the rerun writes each document once."""

from __future__ import annotations

from pathlib import Path

import pytest
from fault_support import FlakyState
from test_writer import answered_job, write_once

from raybatch.errors import StorageUnavailable
from raybatch.ids import OutputKeys
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
    flaky.fail["upsert_documents"] = 1

    report = write_once(flaky, store, job_id)  # type: ignore[arg-type]

    assert report.status is JobStatus.ANSWERED, report.error
    assert write_once(state, store, job_id).status is JobStatus.COMPLETED
    assert len(state.list_documents(job_id)) == len(truth["bundles"][0]["documents"])
