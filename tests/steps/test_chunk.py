"""Chunk planning covers every page exactly once, in order, 8 at most per chunk."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raybatch.steps.chunk import plan_chunks


@given(st.integers(1, 500), st.integers(1, 12))
def test_chunks_cover_pages_once(pages: int, size: int) -> None:
    plans = plan_chunks(pages, size)
    covered = [p for plan in plans for p in plan.pages]
    assert covered == list(range(1, pages + 1))
    assert all(len(plan.pages) <= size for plan in plans)
    assert [plan.n for plan in plans] == list(range(len(plans)))


def test_sixteen_pages_make_two_chunks() -> None:
    assert [(c.first, c.last) for c in plan_chunks(17)] == [(1, 8), (9, 16), (17, 17)]


def test_zero_pages_is_refused() -> None:
    with pytest.raises(ValueError):
        plan_chunks(0)
