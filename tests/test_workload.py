"""The workload budget seen from its users: the sizing rule, a run's budget, ``hold``, the CLI, and a
holder that dies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from clock import FakeClock
from waiting import wait_for

from raybatch import workload
from raybatch.cli import main
from raybatch.errors import ConfigError, WaitTimedOut
from raybatch.settings import Settings, StateSettings, WorkloadSettings, load_settings
from raybatch.state import SqlWorkloadStore, WorkloadLease, open_workload
from raybatch.workload import Budget, concurrency, share

T0 = datetime(2030, 1, 1, tzinfo=UTC)
RAYBATCH = [sys.executable, "-m", "raybatch.cli"]


def lease(lease_id: str, units: int, *, elastic: bool = False) -> WorkloadLease:
    return WorkloadLease(lease_id, lease_id, units, elastic, T0, T0 + timedelta(hours=1))


@pytest.mark.parametrize(
    ("leases", "expected"),
    [
        ([lease("me", 6, elastic=True)], 1.0),  # alone: everything
        ([lease("me", 6, elastic=True), lease("other", 6, elastic=True)], 0.5),  # two runs: half each
        ([lease("me", 3, elastic=True), lease("other", 3, elastic=True)], 0.5),  # free units are split
        ([lease("me", 6, elastic=True), lease("export", 3)], 0.75),  # 12 - 3 held by fixed work
        ([lease("me", 6, elastic=True), lease("search", 4), lease("export", 2)], 0.5),
        ([lease("other", 6, elastic=True), lease("export", 6)], 0.0),  # waiting for room
    ],
)
def test_a_run_shares_what_fixed_holders_leave_with_the_other_runs(
    leases: list[WorkloadLease], expected: float
) -> None:
    assert share(12, leases, "me") == pytest.approx(expected)


def test_no_budget_means_the_whole_machine() -> None:
    assert share(0, [lease("other", 6)], None) == 1.0


@pytest.mark.parametrize(
    ("fraction", "floor", "ceiling", "expected"),
    [(1.0, 2, 10, 10), (0.5, 2, 10, 5), (0.75, 2, 10, 7), (0.0, 2, 10, 2), (0.5, 1, 8, 4), (0.5, 4, 3, 4)],
)
def test_concurrency_scales_the_ceiling_and_keeps_the_floor(
    fraction: float, floor: int, ceiling: int, expected: int
) -> None:
    assert concurrency(fraction, floor, ceiling) == expected


# --- a run's budget on a real database ------------------------------------------------------
@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(database_url=f"sqlite:///{tmp_path / 'state.db'}", raybatch_home=str(tmp_path))


@pytest.fixture
def store(settings: Settings) -> Iterator[SqlWorkloadStore]:
    budget = open_workload(settings.section(StateSettings))
    yield budget
    budget.close()


def make_budget(store: SqlWorkloadStore, settings: Settings, holder: str) -> Budget:
    return Budget(store, settings.section(WorkloadSettings), holder=holder, prepare_ceiling=lambda: 8)


def test_a_second_run_halves_the_first_and_its_end_gives_it_back(
    store: SqlWorkloadStore, settings: Settings
) -> None:
    first = make_budget(store, settings, "run-a")
    first.keep()
    assert (first.register_cap(), first.prepare_cap()) == (10, 8)

    second = make_budget(store, settings, "run-b")
    second.keep()
    first.keep()
    assert (second.register_cap(), second.prepare_cap()) == (5, 4)
    assert (first.register_cap(), first.prepare_cap()) == (5, 4)

    second.give_back()
    first.keep()
    assert first.prepare_cap() == 8
    assert [s.limit for s in first.sizings if s.stage == "prepare"] == [8, 4, 8]


def test_a_run_without_room_works_at_its_floors_until_a_holder_leaves(
    store: SqlWorkloadStore, settings: Settings
) -> None:
    store.take_units(lease_id="x", holder="export", units=8, capacity=12, ttl_seconds=600)
    run = make_budget(store, settings, "run-a")
    run.keep()
    assert run.held is None
    assert (run.register_cap(), run.prepare_cap()) == (2, 1)
    store.give_back_units("x")
    run.keep()
    assert run.held is not None and run.prepare_cap() == 8


def test_a_run_whose_lease_ran_out_takes_it_again_or_falls_to_its_floors(settings: Settings) -> None:
    clock = FakeClock(T0)
    store = SqlWorkloadStore.from_url(settings.database_url.get_secret_value(), now=clock)
    store.migrate()
    run = make_budget(store, settings, "run-a")
    run.keep()
    clock.advance(run.ttl_seconds)  # the driver stalled past its lease
    run.keep()
    assert run.held is not None and run.prepare_cap() == 8  # nobody took the room: taken again
    clock.advance(run.ttl_seconds)
    store.take_units(lease_id="x", holder="export", units=12, capacity=12, ttl_seconds=600)
    run.keep()
    assert run.held is None and run.prepare_cap() == 1
    store.close()


def test_registration_gives_its_units_back(store: SqlWorkloadStore, settings: Settings) -> None:
    run = make_budget(store, settings, "run-a")
    run.keep()
    assert [lease.units for lease in store.live_leases()] == [6]
    run.finish_registration()
    assert [lease.units for lease in store.live_leases()] == [5]


def test_open_budget_holds_for_the_block_and_a_zero_capacity_turns_it_off(settings: Settings) -> None:
    with workload.open_budget(settings, "run-a", prepare_ceiling=8) as budget:
        [held] = workload_leases(settings)
        assert held.holder == "run-a" and held.elastic
        assert held.expires_at - held.taken_at == timedelta(seconds=settings.lease_seconds)  # a short lease
        assert budget.prepare_cap() == 8
    assert workload_leases(settings) == []
    off = settings.model_copy(update={"workload_capacity": 0})
    with workload.open_budget(off, "run-b", prepare_ceiling=8) as budget:
        assert budget.off and budget.prepare_cap() == 8
    assert workload_leases(settings) == []


def workload_leases(settings: Settings) -> list[WorkloadLease]:
    store = open_workload(settings.section(StateSettings))
    try:
        return store.live_leases()
    finally:
        store.close()


# --- hold -----------------------------------------------------------------------------------
def test_hold_takes_units_for_the_block_and_gives_them_back(settings: Settings) -> None:
    with workload.hold("export", 3, settings=settings) as held:
        assert held is not None and held.units == 3
        assert [(lease.holder, lease.units) for lease in workload_leases(settings)] == [("export", 3)]
    assert workload_leases(settings) == []


def test_hold_waits_for_room_and_gives_up_at_its_timeout(settings: Settings, store: SqlWorkloadStore) -> None:
    store.take_units(lease_id="x", holder="search", units=10, capacity=12, ttl_seconds=600)
    clock = FakeClock()
    said: list[str] = []
    with (
        pytest.raises(WaitTimedOut),
        workload.hold(
            "export",
            3,
            settings=settings,
            timeout=5,
            on_wait=said.append,
            sleep=clock.sleep,
            monotonic=clock.monotonic,
        ),
    ):
        pass
    assert said == ["export waits for 3 workload units"] and clock.monotonic() >= 5

    def free_after_two_polls(seconds: float) -> None:
        clock.sleep(seconds)
        if clock.monotonic() >= 7:
            store.give_back_units("x")

    with workload.hold(
        "export", 3, settings=settings, sleep=free_after_two_polls, monotonic=clock.monotonic
    ) as held:
        assert held is not None


def test_hold_refuses_a_cost_the_budget_cannot_hold(settings: Settings) -> None:
    with pytest.raises(ConfigError), workload.hold("huge", 13, settings=settings):
        pass
    off = settings.model_copy(update={"workload_capacity": 0})
    with workload.hold("huge", 13, settings=off) as held:
        assert held is None


# --- the CLI and dying holders --------------------------------------------------------------
def test_the_cli_lists_holders(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    with workload.hold("export", 3, settings=settings):
        assert main(["workload", "--db", settings.database_url.get_secret_value(), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert (listed["capacity"], listed["in_use"], listed["free"]) == (12, 3, 9)
    assert [(h["holder"], h["units"], h["elastic"]) for h in listed["holders"]] == [("export", 3, False)]


def test_a_command_held_from_the_cli_shrinks_a_run_while_it_runs(
    store: SqlWorkloadStore, settings: Settings, tmp_path: Path
) -> None:
    run = make_budget(store, settings, "run-a")
    run.keep()
    assert run.prepare_cap() == 8
    go = tmp_path / "go"
    wait_for_go = WAIT_FOR_FILE.format(path=str(go))
    cli = subprocess.Popen(
        [
            *RAYBATCH,
            "workload",
            "hold",
            "export",
            "6",
            "--db",
            settings.database_url.get_secret_value(),
            "--",
            sys.executable,
            "-c",
            wait_for_go,
        ]
    )
    try:
        wait_for(lambda: len(store.live_leases()) == 2, 60, "the CLI taking its units")
        run.keep()
        assert run.prepare_cap() == 4 and run.register_cap() == 5
        go.touch()
        assert cli.wait(timeout=60) == 3  # the command's exit code
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    run.keep()
    assert [lease.holder for lease in store.live_leases()] == ["run-a"]
    assert run.prepare_cap() == 8


WAIT_FOR_FILE = """
import pathlib, sys, time
while not pathlib.Path({path!r}).exists():
    time.sleep(0.1)
sys.exit(3)
"""

HOLD_FOREVER = """
import sys, time
from raybatch import workload
with workload.hold("doomed", 12, database_url=sys.argv[1], ttl=float(sys.argv[2])):
    print("holding", flush=True)
    time.sleep(600)
"""


def test_a_holder_killed_with_sigkill_frees_its_units_after_its_ttl(
    store: SqlWorkloadStore, settings: Settings
) -> None:
    ttl = 2.0
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_FOREVER, settings.database_url.get_secret_value(), str(ttl)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        [taken] = store.live_leases()
        # Renewed while alive: still held after its first expiry.
        wait_for(
            lambda: store.live_leases()[0].expires_at > taken.expires_at + timedelta(seconds=1),
            60,
            "the lease renewed",
        )
        assert store.take_units(lease_id="next", holder="next", units=1, capacity=12, ttl_seconds=60) is None
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    wait_for(lambda: store.live_leases() == [], 60, "the dead holder's units coming back")
    assert store.take_units(lease_id="next", holder="next", units=12, capacity=12, ttl_seconds=60) is not None


def test_a_cli_hold_stopped_with_sigterm_ends_its_command_and_gives_back_at_once(
    store: SqlWorkloadStore, settings: Settings, tmp_path: Path
) -> None:
    never = [sys.executable, "-c", WAIT_FOR_FILE.format(path=str(tmp_path / "never"))]
    url = settings.database_url.get_secret_value()
    cli = subprocess.Popen([*RAYBATCH, "workload", "hold", "export", "4", "--db", url, "--", *never])
    try:
        wait_for(lambda: len(store.live_leases()) == 1, 60, "the CLI taking its units")
        cli.send_signal(signal.SIGTERM)
        assert cli.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert store.live_leases() == []  # long before its 70-minute lease would end
