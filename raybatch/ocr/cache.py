"""The per-page OCR cache: (source sha256, page, engine name incl. version) → PageText."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

from raybatch.models import PageText
from raybatch.ocr.port import OcrEngine, PageImage


class PageTextCache(Protocol):
    """Where OCR results are kept; ``SqlStateStore`` is one (its ``page_ocr`` table)."""

    def get_page_text(self, sha256: str, page: int, engine: str) -> PageText | None: ...

    def put_page_text(self, sha256: str, engine: str, text: PageText) -> None: ...


class InMemoryPageTextCache:
    """A dict-backed cache for tests and single-process runs."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, int, str], PageText] = {}
        self._lock = threading.Lock()

    def get_page_text(self, sha256: str, page: int, engine: str) -> PageText | None:
        """The cached text of one page, or None."""
        with self._lock:
            return self._items.get((sha256, page, engine))

    def put_page_text(self, sha256: str, engine: str, text: PageText) -> None:
        """Keep one page's text (a later put for the same key replaces it)."""
        with self._lock:
            self._items[(sha256, text.page, engine)] = text

    def __len__(self) -> int:
        return len(self._items)


class CachedOcr:
    """An engine in front of a cache: pages already read for this source never reach the engine."""

    def __init__(self, engine: OcrEngine, cache: PageTextCache, sha256: str) -> None:
        self.engine = engine
        self.cache = cache
        self.sha256 = sha256
        self.name = engine.name

    def read(self, pages: Sequence[PageImage]) -> list[PageText]:
        """Cached pages from the cache, the rest from the engine (then cached), in input order."""
        found = [self.cache.get_page_text(self.sha256, p.page, self.name) for p in pages]
        missing = [p for p, hit in zip(pages, found, strict=True) if hit is None]
        fresh = iter(self.engine.read(missing) if missing else [])
        result: list[PageText] = []
        for hit in found:
            if hit is None:
                hit = next(fresh)
                self.cache.put_page_text(self.sha256, self.name, hit)
            result.append(hit)
        return result
