"""Deal answered jobs into write calls: small jobs travel together, the others alone.

The jobs come in the order they are to be written (urgent first), each admitted under the MB
budget already. They are dealt into at most one call per idle writer, as evenly as they allow: a
call carries up to ``GROUP_JOBS`` jobs while their source MB stay within ``GROUP_MB``. A job that
must go alone (urgent, or one whose group's writer died) neither joins a call nor is joined. Once
every writer has its call, the jobs left over wait: none is passed over for a later one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

# The most jobs one write call carries. A call costs its writer about 20 ms besides its jobs (its
# reads, the rows' and manifests' statements, the table file, each put's syncs): 0.7 ms a small job
# in calls of 32, 0.2 in calls of 128 (a writer's whole cost, 6.1 ms a job, became 5.5).
GROUP_JOBS = 128
GROUP_MB = 4.0  # ... while their source MB stay within this; a larger job goes alone

T = TypeVar("T")


@dataclass(frozen=True)
class Dealt(Generic[T]):
    """A job to deal, with its source MB and whether it goes alone."""

    job: T
    size_mb: float
    alone: bool = False


def deal(jobs: Sequence[Dealt[T]], writers: int) -> list[list[Dealt[T]]]:
    """``jobs`` (in order) dealt into at most ``writers`` calls, in order."""
    per = min(GROUP_JOBS, max(1, math.ceil(len(jobs) / max(1, writers))))
    calls: list[list[Dealt[T]]] = []
    for job in jobs:
        if calls and _joins(calls[-1], job, per):
            calls[-1].append(job)
        elif len(calls) < writers:
            calls.append([job])
        else:
            break
    return calls


def _joins(call: Sequence[Dealt[T]], job: Dealt[T], per: int) -> bool:
    """May ``job`` ride in the same call as ``call``?"""
    if len(call) >= per or job.alone or call[0].alone:
        return False
    return sum(j.size_mb for j in call) + job.size_mb <= GROUP_MB
