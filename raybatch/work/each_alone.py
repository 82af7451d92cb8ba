"""Work for a group of jobs done together, and each job alone should that fail: a failure stays
with the job it belongs to, and the others go on. An outage is every job's: nothing is tried alone."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from raybatch.errors import TransientError

T = TypeVar("T")

# Does the work for these items (by job id), in one go; what refused each job that it did not do.
Together = Callable[[Mapping[int, T]], Mapping[int, Exception]]


def together_else_alone(items: Mapping[int, T], together: Together[T]) -> dict[int, Exception]:
    """``together(items)``; should it raise other than for an outage, each job's item again alone
    (so only the jobs whose own item fails fail). What refused each job, by job id."""
    if not items:
        return {}
    try:
        return dict(together(items))
    except Exception as exc:
        if isinstance(exc, TransientError) or len(items) == 1:
            return dict.fromkeys(items, exc)
    alone = (together_else_alone({key: item}, together) for key, item in items.items())
    return {i: e for refused in alone for i, e in refused.items()}
