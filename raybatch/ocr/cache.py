"""The per-page OCR cache: (source sha256, page, engine name incl. version) → PageText.

Prepare tasks hold no database credentials, so the cache travels with them: the driver looks up
what is known for a chunk's pages (``CarriedPageTexts``), the task adds what it reads, and the
driver stores the additions when the task's summary comes back.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Protocol

from raybatch.models import CachedPage, PageText
from raybatch.ocr.port import OcrEngine, PageImage


class PageTextCache(Protocol):
    """Where OCR results are kept; ``SqlStateStore`` is one (its ``page_ocr`` table)."""

    def get_page_text(self, sha256: str, page: int, engine: str) -> PageText | None:
        """The cached text of page ``page`` read by ``engine`` (name and version), or None."""
        ...

    def put_page_text(self, sha256: str, engine: str, text: PageText) -> None:
        """Cache ``text`` under (sha256, text.page, engine); a second put replaces it."""
        ...


class PageTextLookup(Protocol):
    """What the driver reads the cache through; ``SqlStateStore`` is one."""

    def cached_page_texts(self, sha256: str, pages: Sequence[int]) -> list[CachedPage]:
        """Every cached text of these pages of one source, by any engine."""
        ...

    def cached_page_texts_of(self, sha256s: Iterable[str]) -> dict[str, list[CachedPage]]:
        """Every cached text of every page of these sources, by any engine, by sha256."""
        ...


class CarriedPageTexts:
    """The cache of one chunk of one source, carried into its prepare task and back."""

    def __init__(self, known: Iterable[CachedPage] = ()) -> None:
        self._known = {(p.text.page, p.engine): p.text for p in known}
        self.added: list[CachedPage] = []

    def get_page_text(self, sha256: str, page: int, engine: str) -> PageText | None:
        """The known text of one page of this chunk's source, or None."""
        return self._known.get((page, engine))

    def put_page_text(self, sha256: str, engine: str, text: PageText) -> None:
        """Keep a new read, to go back to the driver."""
        self._known[text.page, engine] = text
        self.added.append(CachedPage(engine, text))


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
