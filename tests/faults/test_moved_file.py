"""A file moved (and renamed) after it was registered: its job fails as unreadable where the file
was; the next run of the folder it is in now takes the job up and reads the file from there."""

from __future__ import annotations

from pathlib import Path

from writing import write_answered

from raybatch.claude.emulator.rules import answer_from_truth
from raybatch.ids import custom_id
from raybatch.models import ChunkRecord, ChunkStatus, JobStatus
from raybatch.register import Registrar
from raybatch.samples import write_samples
from raybatch.settings import StoreSettings
from raybatch.sources import list_sources
from raybatch.state import SqlStateStore
from raybatch.steps.chunk import plan_chunks


def answer(state: SqlStateStore, job_id: int, bundle: dict) -> None:
    """The job's chunks answered with the truth (as the coordinator would file them)."""
    chunks = [
        ChunkRecord(
            job_id,
            plan.n,
            plan.first,
            plan.last,
            custom_id(job_id, plan.n),
            "k",
            ChunkStatus.SUCCEEDED,
            answer=answer_from_truth(bundle, list(plan.pages)).model_dump_json(),
        )
        for plan in plan_chunks(bundle["pages"])
    ]
    state.save_chunks(job_id, chunks)
    state.transition(job_id, [JobStatus.PENDING], JobStatus.ANSWERED, pages=bundle["pages"])


def test_a_moved_file_is_read_from_where_it_is_now(tmp_path: Path, state: SqlStateStore) -> None:
    inbox, archive = tmp_path / "inbox", tmp_path / "archive"
    archive.mkdir()
    bundle = write_samples(inbox, bundles=1, seed=7)["bundles"][0]
    registrar = Registrar(state, StoreSettings(), max_page_pixels=10**8)
    [first] = registrar.register_all(list_sources(str(inbox), StoreSettings()).files)
    answer(state, first.job.id, bundle)
    (inbox / bundle["file"]).rename(archive / "renamed.pdf")  # moved before it was written

    assert write_answered(state, first.job.id).status is JobStatus.FAILED
    failed = state.get_job(first.job.id)
    assert (failed.error_message or "").startswith("unreadable: ")

    [again] = registrar.register_all(list_sources(str(archive), StoreSettings()).files)
    job = state.get_job(again.job.id)
    assert job.id == failed.id and not again.created
    assert (job.status, job.source_uri) == (JobStatus.PENDING, (archive / "renamed.pdf").as_uri())
    state.transition(job.id, [JobStatus.PENDING], JobStatus.ANSWERED)  # its answers are kept
    assert write_answered(state, job.id).status is JobStatus.COMPLETED
    assert {d.job_id for d in state.list_documents()} == {job.id}
