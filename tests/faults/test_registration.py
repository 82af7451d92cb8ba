"""Registration's faults: a file whose inspection hangs fails alone once REGISTER_TIMEOUT passed, and
the intake goes on; a file over MAX_PAGES_PER_FILE fails its own job before any request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clock import FakeClock
from test_register_intake import StandInInspector, crash_reason, write_pdf

from raybatch.models import JobStatus
from raybatch.register import Registrar, SourceIntake
from raybatch.settings import StoreSettings
from raybatch.sources import SourceFile, iter_sources
from raybatch.state import SqlStateStore


class HangingInspector(StandInInspector):
    """A task holding a file named ``hang*`` never comes back."""

    def hangs(self, ref: list[SourceFile]) -> bool:
        return any(source.name.startswith("hang") for source in ref)


def test_a_hung_registration_fails_its_file_and_the_intake_goes_on(
    state: SqlStateStore, tmp_path: Path
) -> None:
    for name in ["a.pdf", "hang.pdf", "c.pdf"]:
        write_pdf(tmp_path / name, 1)
    inspector, clock, canceled = HangingInspector(), FakeClock(), []
    intake = SourceIntake(
        iter_sources(str(tmp_path), StoreSettings()),
        inspector,
        Registrar(state, StoreSettings(), max_page_pixels=10**9),
        in_flight=4,
        ready=lambda ref: not inspector.hangs(ref),
        get=inspector.get,
        failure=crash_reason,
        timeout=60.0,
        cancel=canceled.append,
        monotonic=clock.monotonic,
    )
    jobs: list[Any] = []
    for _ in range(4):  # within the limit: the run waits for the task
        clock.advance(10.0)
        jobs += intake.take()
    assert jobs == [] and canceled == [] and not intake.finished
    while not intake.finished:
        clock.advance(30.0)
        jobs += intake.take()
    # The task of three files ran past the limit: canceled, each file read alone; the hung one fails.
    assert inspector.tasks == [["a.pdf", "c.pdf", "hang.pdf"], ["a.pdf"], ["c.pdf"], ["hang.pdf"]]
    assert len(canceled) == 2
    by_name = {j.source_name: j for j in jobs}
    assert by_name["a.pdf"].status is JobStatus.PENDING and by_name["c.pdf"].status is JobStatus.PENDING
    hung = by_name["hang.pdf"]
    assert hung.status is JobStatus.FAILED and hung.error_class == "TimeLimitExceeded"
    assert "REGISTER_TIMEOUT (60 s)" in (hung.error_message or "")


def test_a_file_over_max_pages_per_file_fails_before_any_request(
    state: SqlStateStore, tmp_path: Path
) -> None:
    write_pdf(tmp_path / "long.pdf", 9)
    write_pdf(tmp_path / "short.pdf", 8)
    registrar = Registrar(state, StoreSettings(), max_page_pixels=10**9, max_pages=8)
    files = list(iter_sources(str(tmp_path), StoreSettings()))
    by_name = {r.job.source_name: r.job for r in registrar.register_all(files)}
    assert by_name["short.pdf"].status is JobStatus.PENDING
    long = by_name["long.pdf"]
    assert long.status is JobStatus.FAILED and long.error_class == "InvalidSource"
    assert "9 pages, over MAX_PAGES_PER_FILE (8)" in (long.error_message or "")
    assert state.get_chunks(long.id) == []
