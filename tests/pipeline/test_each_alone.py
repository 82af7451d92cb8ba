"""together_else_alone: a group's work done together, each job alone only when that fails."""

from __future__ import annotations

from collections.abc import Mapping

from raybatch.errors import TransientError
from raybatch.work.each_alone import together_else_alone


class Work:
    """Refuses any call that carries a broken item; records the jobs of each call."""

    def __init__(self, broken: set[str], error: type[Exception] = ValueError) -> None:
        self.broken, self.error, self.calls = broken, error, []

    def __call__(self, items: Mapping[int, str]) -> dict[int, Exception]:
        self.calls.append(sorted(items))
        if set(items.values()) & self.broken:
            raise self.error("broken")
        return {}


def test_the_work_is_done_once_for_all_when_it_can_be() -> None:
    work = Work(set())
    assert together_else_alone({1: "a", 2: "b", 3: "c"}, work) == {}
    assert work.calls == [[1, 2, 3]]


def test_a_broken_item_fails_its_own_job_alone() -> None:
    work = Work({"b"})
    refused = together_else_alone({1: "a", 2: "b", 3: "c"}, work)
    assert list(refused) == [2] and isinstance(refused[2], ValueError)
    assert work.calls == [[1, 2, 3], [1], [2], [3]]


def test_an_outage_is_every_jobs_and_nothing_is_tried_alone() -> None:
    work = Work({"b"}, TransientError)
    refused = together_else_alone({1: "a", 2: "b"}, work)
    assert sorted(refused) == [1, 2] and all(isinstance(e, TransientError) for e in refused.values())
    assert work.calls == [[1, 2]]


def test_what_the_work_itself_refuses_is_passed_on_and_nothing_is_not_called() -> None:
    def canceling(items: Mapping[int, str]) -> dict[int, Exception]:
        return {2: LookupError("canceled")} if 2 in items else {}

    assert list(together_else_alone({1: "a", 2: "b"}, canceling)) == [2]
    assert together_else_alone({}, Work(set())) == {}
