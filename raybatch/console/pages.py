"""Page images for the console: a job's page drawn from the document PDF that holds it (upright,
as the writer sliced it), or from the source when no document holds it; kept in a small LRU cache.

Every key and URI comes from the state store's rows, never from a request.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from enum import StrEnum

import pymupdf

from raybatch.models import DocumentRecord, JobRecord, SourceKind
from raybatch.objects import ObjectStore
from raybatch.settings import StoreSettings
from raybatch.sources import read_source


class PageSize(StrEnum):
    """How large a page is drawn: a strip thumbnail or the review queue's large view."""

    SMALL = "s"
    LARGE = "l"


WIDTHS = {PageSize.SMALL: 120, PageSize.LARGE: 900}


class PageCache:
    """Drawn pages (PNG) by (job, page, size, document version), the newest ``capacity`` kept."""

    def __init__(self, capacity: int = 512) -> None:
        self._capacity = capacity
        self._drawn: OrderedDict[tuple[object, ...], bytes] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[object, ...]) -> bytes | None:
        with self._lock:
            if key in self._drawn:
                self._drawn.move_to_end(key)
            return self._drawn.get(key)

    def put(self, key: tuple[object, ...], image: bytes) -> None:
        with self._lock:
            self._drawn[key] = image
            while len(self._drawn) > self._capacity:
                self._drawn.popitem(last=False)


def draw_page(
    store: ObjectStore,
    settings: StoreSettings,
    job: JobRecord,
    documents: list[DocumentRecord],
    page: int,
    size: PageSize,
) -> bytes | None:
    """PNG of page ``page`` of ``job``, or None when neither a document nor the source has it."""
    holder = next((d for d in documents if d.first_page <= page <= d.last_page and d.pdf_key), None)
    if holder is not None and holder.pdf_key:
        return _draw(store.get(holder.pdf_key), page - holder.first_page, WIDTHS[size])
    if job.kind is not SourceKind.PDF:
        return None
    return _draw(read_source(job.source_uri, settings, sha256=job.sha256), page - 1, WIDTHS[size])


def _draw(pdf: bytes, index: int, width: int) -> bytes | None:
    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        if not 0 <= index < doc.page_count:
            return None
        page = doc[index]
        zoom = width / max(page.rect.width, 1)
        return bytes(page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom)).tobytes("png"))
