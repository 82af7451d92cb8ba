"""Chunk: a source's pages → consecutive groups of at most 8, one Claude request each."""

from __future__ import annotations

from dataclasses import dataclass

PAGES_PER_CHUNK = 8


@dataclass(frozen=True)
class ChunkPlan:
    """Chunk ``n`` (from 0) covers pages ``first``..``last`` (1-based, inclusive)."""

    n: int
    first: int
    last: int

    @property
    def pages(self) -> range:
        return range(self.first, self.last + 1)


def plan_chunks(pages: int, size: int = PAGES_PER_CHUNK) -> list[ChunkPlan]:
    """Split ``pages`` pages into chunks of ``size`` (the last may be shorter)."""
    if pages < 1 or size < 1:
        raise ValueError("a source needs at least one page and chunks at least one page")
    starts = range(1, pages + 1, size)
    return [ChunkPlan(n, first, min(first + size - 1, pages)) for n, first in enumerate(starts)]
