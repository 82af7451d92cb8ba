"""Registration as a stream: files inspected elsewhere, registered in listing order, a crash failing
only the file that caused it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymupdf
from ray.exceptions import RayTaskError, WorkerCrashedError

from raybatch.loops.scheduler import failure_reason
from raybatch.models import JobStatus
from raybatch.register import Inspection, Registrar, SourceIntake, inspect_source
from raybatch.settings import StoreSettings
from raybatch.sources import SourceFile, iter_sources
from raybatch.state import SqlStateStore


def write_pdf(path: Path, pages: int) -> None:
    doc = pymupdf.open()
    for n in range(pages):
        doc.new_page().insert_text((72, 72), f"{path.name} page {n + 1}")
    doc.save(path)


class StandInInspector:
    """Inspects in this process; a file named ``crash*`` dies like a worker killed by its reader."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def inspect(self, source: SourceFile) -> Any:
        self.started.append(source.name)
        return source

    def get(self, source: SourceFile) -> Inspection:
        if source.name.startswith("crash"):
            raise WorkerCrashedError()
        if source.name.startswith("raise"):
            raise RayTaskError("inspect_file", "traceback", MemoryError("the page tree is a bomb"))
        return inspect_source(source, StoreSettings(), 10**9)


def crash_reason(exc: BaseException) -> str | None:
    if isinstance(exc, RayTaskError) and exc.cause is not None:
        return failure_reason(exc.cause)
    return failure_reason(exc)


def test_a_file_that_crashes_its_reader_fails_its_own_job(state: SqlStateStore, tmp_path: Path) -> None:
    for name, pages in [("a.pdf", 2), ("crash.pdf", 1), ("c.pdf", 3), ("raise.pdf", 1), ("e.pdf", 1)]:
        write_pdf(tmp_path / name, pages)
    inspector = StandInInspector()
    registrar = Registrar(state, StoreSettings(), max_page_pixels=10**9)
    intake = SourceIntake(
        iter_sources(str(tmp_path), StoreSettings()),
        inspector,
        registrar,
        in_flight=2,
        ready=lambda ref: True,
        get=inspector.get,
        failure=crash_reason,
    )
    jobs = []
    while not intake.finished:
        assert len(inspector.started) - intake.jobs <= 2  # a bounded number of files in flight
        jobs += intake.take()

    assert [j.source_name for j in jobs] == ["a.pdf", "c.pdf", "crash.pdf", "e.pdf", "raise.pdf"]
    assert [j.id for j in jobs] == sorted(j.id for j in jobs)  # ids follow the listing
    by_name = {j.source_name: j for j in jobs}
    assert {n: j.status for n, j in by_name.items()} == {
        "a.pdf": JobStatus.PENDING,
        "c.pdf": JobStatus.PENDING,
        "crash.pdf": JobStatus.FAILED,
        "e.pdf": JobStatus.PENDING,
        "raise.pdf": JobStatus.FAILED,
    }
    assert by_name["a.pdf"].pages == 2 and by_name["c.pdf"].pages == 3
    assert "crashed its worker" in (by_name["crash.pdf"].error_message or "")
    assert "WorkerCrashedError" in (by_name["crash.pdf"].error_message or "")
    assert "the page tree is a bomb" in (by_name["raise.pdf"].error_message or "")
    assert intake.files == 5 and intake.jobs == 5


def test_the_window_follows_the_budget_and_registration_ends(state: SqlStateStore, tmp_path: Path) -> None:
    for n in range(6):
        write_pdf(tmp_path / f"{n}.pdf", 1)
    inspector = StandInInspector()
    window, back = [1], [False]
    ended: list[int] = []
    intake = SourceIntake(
        iter_sources(str(tmp_path), StoreSettings()),
        inspector,
        Registrar(state, StoreSettings(), max_page_pixels=10**9),
        in_flight=lambda: window[0],  # the workload budget's registration share, read each time
        ready=lambda ref: back[0],
        get=inspector.get,
        failure=crash_reason,
        on_listed=lambda: ended.append(intake.jobs),
    )
    intake.take()
    assert len(inspector.started) == 1
    window[0] = 3  # the share grew
    intake.take()
    assert len(inspector.started) == 3 and not ended
    back[0] = True  # the inspections come back
    while not intake.finished:
        intake.take()
    intake.take()
    assert ended == [6]  # the registration's units go back once, when every file is registered
