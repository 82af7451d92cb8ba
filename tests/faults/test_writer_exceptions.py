"""An exception raybatch did not raise on purpose, met while writing a job (a ValueError from
stitching, a pydantic error), fails that job at once with its cause and the file's name: it is not
taken for a dead writer and tried again until ``AttemptsExhausted``."""

from __future__ import annotations

from typing import Any

import pytest
from driver_support import pending_job
from writing import write_answered

from raybatch.ids import custom_id
from raybatch.models import ChunkRecord, ChunkStatus, JobStatus
from raybatch.state import SqlStateStore
from raybatch.work import writer as writer_module


def _stitch_fails(*_: Any) -> Any:
    raise ValueError("document 2 starts before document 1 ends")


@pytest.mark.parametrize("cause", ["ValueError", "ValidationError"])
def test_a_foreign_exception_fails_the_job_at_once_naming_the_file(
    state: SqlStateStore, monkeypatch: pytest.MonkeyPatch, cause: str
) -> None:
    job_id = pending_job(state, 7, pages=8, status=JobStatus.ANSWERED)
    if cause == "ValidationError":  # an answer that no longer validates
        answer = '{"documents": "not a list"}'
        record = ChunkRecord(job_id, 0, 1, 8, custom_id(job_id, 0), "k", ChunkStatus.SUCCEEDED, answer=answer)
        state.save_chunks(job_id, [record])
    else:
        monkeypatch.setattr(writer_module, "stitch", _stitch_fails)
    report = write_answered(state, job_id)  # returns: an exception out of it would read as a dead writer
    assert report.status is JobStatus.FAILED
    job = state.get_job(job_id)
    assert (job.status, job.error_class, job.attempts) == (JobStatus.FAILED, cause, 1)
    assert (job.error_message or "").startswith(f"7.pdf: unexpected {cause} while writing: ")
    assert [e.error_class for e in state.list_errors(job_id)] == [cause]
