"""Registration as a stream: files inspected elsewhere, registered in listing order, a crash failing
only the file that caused it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pymupdf
import pytest
from ray.exceptions import RayTaskError, WorkerCrashedError

from raybatch.loops.scheduler import failure_reason
from raybatch.models import JobStatus
from raybatch.register import GROUP_BYTES, GROUP_FILES, Inspection, Registrar, SourceIntake, inspect_source
from raybatch.settings import StoreSettings
from raybatch.sources import SourceFile, iter_sources
from raybatch.state import SqlStateStore


def write_pdf(path: Path, pages: int) -> None:
    doc = pymupdf.open()
    for n in range(pages):
        doc.new_page().insert_text((72, 72), f"{path.name} page {n + 1}")
    doc.save(path)


class StandInInspector:
    """Inspects in this process; a task holding a file named ``crash*`` dies like a worker killed
    by its reader, one holding ``raise*`` fails as a task."""

    def __init__(self) -> None:
        self.tasks: list[list[str]] = []  # the files of each task started, in order

    @property
    def started(self) -> list[str]:
        return [name for task in self.tasks for name in task]

    def inspect(self, sources: Sequence[SourceFile]) -> Any:
        self.tasks.append([source.name for source in sources])
        return list(sources)

    def get(self, sources: list[SourceFile]) -> list[Inspection]:
        if any(source.name.startswith("crash") for source in sources):
            raise WorkerCrashedError()
        if any(source.name.startswith("raise") for source in sources):
            raise RayTaskError("inspect_files", "traceback", MemoryError("the page tree is a bomb"))
        return [inspect_source(source, StoreSettings(), 10**9) for source in sources]


def crash_reason(exc: BaseException) -> str | None:
    if isinstance(exc, RayTaskError) and exc.cause is not None:
        return failure_reason(exc.cause)
    return failure_reason(exc)


def intake_of(
    state: SqlStateStore, folder: Path, inspector: StandInInspector, in_flight: int
) -> SourceIntake:
    return SourceIntake(
        iter_sources(str(folder), StoreSettings()),
        inspector,
        Registrar(state, StoreSettings(), max_page_pixels=10**9),
        in_flight=in_flight,
        ready=lambda ref: True,
        get=inspector.get,
        failure=crash_reason,
    )


def test_a_file_that_crashes_its_reader_fails_its_own_job(state: SqlStateStore, tmp_path: Path) -> None:
    for name, pages in [("a.pdf", 2), ("crash.pdf", 1), ("c.pdf", 3), ("raise.pdf", 1), ("e.pdf", 1)]:
        write_pdf(tmp_path / name, pages)
    inspector = StandInInspector()
    intake = intake_of(state, tmp_path, inspector, in_flight=2)
    jobs = []
    while not intake.finished:
        jobs += intake.take()

    # The five small files went to one task; it crashed, so each was read again alone, in order.
    names = ["a.pdf", "c.pdf", "crash.pdf", "e.pdf", "raise.pdf"]
    assert inspector.tasks == [names] + [[name] for name in names]
    assert [j.source_name for j in jobs] == names
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


def test_small_files_share_a_task_and_a_large_one_goes_alone(state: SqlStateStore, tmp_path: Path) -> None:
    names = [f"{n:02}.pdf" for n in range(GROUP_FILES + 9)]
    for name in names:
        write_pdf(tmp_path / name, 1)
    (tmp_path / "05.pdf").write_bytes((tmp_path / "05.pdf").read_bytes() + b"\n" * GROUP_BYTES)  # large
    inspector = StandInInspector()
    intake = intake_of(state, tmp_path, inspector, in_flight=8)
    jobs = []
    while not intake.finished:
        jobs += intake.take()

    assert inspector.tasks == [names[:5], ["05.pdf"], names[6 : 6 + GROUP_FILES], names[6 + GROUP_FILES :]]
    assert [j.source_name for j in jobs] == names
    assert all(j.status is JobStatus.PENDING and j.pages == 1 for j in jobs)


def test_the_window_follows_the_budget_and_registration_ends(
    state: SqlStateStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("raybatch.register.GROUP_FILES", 1)  # a task per file: the window counts tasks
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
