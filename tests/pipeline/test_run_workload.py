"""Two runs on one local Ray and one database share the workload budget: the second one sizes
itself to its share while the first runs, and both complete."""

from __future__ import annotations

import threading
from pathlib import Path

import pymupdf
import pytest
from pipeline_support import run_settings
from waiting import wait_for

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.models import JobStatus
from raybatch.pipeline import RunReport, run
from raybatch.settings import Settings, StateSettings
from raybatch.state import open_state, open_workload

pytestmark = [pytest.mark.ray, pytest.mark.slow]

CLUSTER_CAP = 8  # the prepare ceiling on the 2-CPU test cluster: max(8, 2 x CPUs)


def one_page_pdfs(folder: Path, stem: str, count: int) -> Path:
    folder.mkdir(parents=True)
    for n in range(count):
        doc = pymupdf.open()
        page = doc.new_page()
        page.insert_text((72, 72), f"INVOICE No {stem}-{n}\nSeller: Acme Ltd\nTotal: {100 + n}.00 USD")
        doc.save(folder / f"{stem}_{n}.pdf")
        doc.close()
    return folder


def test_a_second_run_takes_its_share_beside_the_first_and_both_complete(
    ray_session: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAYBATCH_EMULATOR", "1")
    # Batches end after a few seconds, so the first run still holds its units when the second starts.
    with EmulatorServer(EmulatorConfig(processing_seconds=3.0)) as emulator:
        settings = run_settings(
            tmp_path / "home", emulator, ocr_engine="none", workload_refresh_seconds=0.2, result_workers=1
        )
        first_in = one_page_pdfs(tmp_path / "first", "a", 2)
        second_in = one_page_pdfs(tmp_path / "second", "b", 2)
        reports: dict[str, RunReport] = {}
        first = threading.Thread(target=lambda: reports.update(first=run(settings, str(first_in))))
        first.start()
        try:
            wait_for_holders(settings, 1)
            reports["second"] = run(settings, str(second_in))
        finally:
            first.join(timeout=300)

    assert set(reports) == {"first", "second"}
    for report in reports.values():
        assert report.ok and {j.status for j in report.jobs} == {JobStatus.COMPLETED}
    second = reports["second"].workload
    # Beside the first run (6 units each of 12, 5 once a run has registered; registration streams
    # beside preparing, so either run may finish registering first): about half of every ceiling,
    # never more than its units and its part of the free ones.
    beside = [s for s in second if s.holders == 2]
    assert {s.stage for s in beside} == {"register", "prepare"}
    assert all(5 / 11 - 0.001 <= s.share <= 6 / 11 + 0.001 for s in beside)
    # Registration is sized only while the run still holds its registration unit: 6 of 11 or 12.
    assert {s.limit for s in beside if s.stage == "register"} == {5}  # half of 10
    assert {s.limit for s in beside if s.stage == "prepare"} <= {CLUSTER_CAP * 5 // 11, CLUSTER_CAP // 2}
    assert all(s.limit <= (10 if s.stage == "register" else CLUSTER_CAP) for s in second)
    # The first run started alone with every ceiling.
    assert reports["first"].workload[0].share == 1.0 and reports["first"].workload[0].limit == 10
    store = open_workload(settings.section(StateSettings))
    assert store.live_leases() == []  # both gave their units back
    store.close()


def wait_for_holders(settings: Settings, count: int, timeout: float = 120) -> None:
    store = open_workload(settings.section(StateSettings))
    try:
        wait_for(lambda: len(store.live_leases()) >= count, timeout, "the first run's workload units", 0.05)
    finally:
        store.close()


def wait_for_a_job(settings: Settings, timeout: float = 120) -> None:
    """Until the first run registered a job: it has sized its registration (alone) by then."""
    state = open_state(settings.section(StateSettings))
    try:
        wait_for(lambda: sum(state.count_jobs().values()) > 0, timeout, "the first run's first job", 0.05)
    finally:
        state.close()
