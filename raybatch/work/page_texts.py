"""Page texts for writing: each page's own text layer, else what OCR read (the per-page cache).

Preparing read the scanned pages already; the writer takes their text from the cache rather than
reading them again. Of several engines' reads of one page, the most confident wins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pymupdf

from raybatch.models import CachedPage, TextSource
from raybatch.ocr.cache import PageTextLookup
from raybatch.steps.render import text_layer

PAGE_BREAK = "\f"  # between pages in a document's text, as pdftotext writes it


@dataclass(frozen=True)
class PageTexts:
    """The text of a job's pages by page number, and the pages whose text came from OCR."""

    texts: Mapping[int, str]
    ocr_pages: frozenset[int]

    def ocr_texts(self, first_page: int, last_page: int) -> dict[int, str]:
        """The OCR text of the scanned pages among ``first_page..last_page``."""
        return {p: self.texts[p] for p in range(first_page, last_page + 1) if p in self.ocr_pages}


def page_texts(
    source: pymupdf.Document, sha256: str, cache: PageTextLookup, spans: Sequence[tuple[int, int]]
) -> PageTexts:
    """The text of every page in ``spans`` (first and last pages, 1-based) of an open source."""
    pages = sorted({p for first, last in spans for p in range(first, last + 1)})
    texts = {p: text_layer(source[p - 1]).text for p in pages}
    missing = [p for p in pages if not texts[p]]
    read = _most_confident(cache.cached_page_texts(sha256, missing)) if missing else {}
    texts.update(read)
    return PageTexts(texts, frozenset(read))


def document_text(pages: PageTexts, first_page: int, last_page: int) -> str:
    """A document's text: its pages' texts, a form feed between pages."""
    return PAGE_BREAK.join(pages.texts.get(p, "") for p in range(first_page, last_page + 1))


def _most_confident(cached: Sequence[CachedPage]) -> dict[int, str]:
    best: dict[int, CachedPage] = {}
    for item in cached:
        page = item.text.page
        usable = item.text.source is TextSource.OCR and item.text.text.strip()
        if usable and (page not in best or item.text.confidence > best[page].text.confidence):
            best[page] = item
    return {page: item.text.text for page, item in best.items()}
