"""deal: answered jobs into write calls."""

from __future__ import annotations

import pytest

from raybatch.steps import deal as dealing
from raybatch.steps.deal import GROUP_JOBS, GROUP_MB, Dealt, deal


def jobs(*sizes: float, alone: tuple[int, ...] = ()) -> list[Dealt[int]]:
    return [Dealt(n, mb, n in alone) for n, mb in enumerate(sizes)]


def ids(calls: list[list[Dealt[int]]]) -> list[list[int]]:
    return [[j.job for j in call] for call in calls]


def test_small_jobs_are_shared_out_evenly_over_the_writers() -> None:
    assert ids(deal(jobs(*[0.1] * 6), writers=2)) == [[0, 1, 2], [3, 4, 5]]
    assert ids(deal(jobs(*[0.1] * 6), writers=9)) == [[n] for n in range(6)]


def test_a_call_keeps_within_its_jobs_and_megabytes() -> None:
    calls = deal(jobs(*[0.01] * (3 * GROUP_JOBS)), writers=2)
    assert [len(call) for call in calls] == [GROUP_JOBS, GROUP_JOBS], "the rest wait"
    assert ids(deal(jobs(1.5, 1.5, 1.5, 0.5), writers=1)) == [[0, 1]], "the third would pass GROUP_MB"
    assert ids(deal(jobs(GROUP_MB + 1, 0.1), writers=2)) == [[0], [1]], "a large job goes alone"


def test_a_job_that_must_go_alone_neither_joins_nor_is_joined_and_order_is_kept() -> None:
    calls = deal(jobs(0.1, 0.1, 0.1, 0.1, alone=(0, 2)), writers=3)
    assert ids(calls) == [[0], [1], [2]], "job 3 waits: no job is passed over"


def test_one_job_a_call_when_groups_are_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dealing, "GROUP_JOBS", 1)
    assert ids(deal(jobs(0.1, 0.1, 0.1), writers=2)) == [[0], [1]]
