"""A stand-in engine that reads text a caller stored in the PNG itself: exact and instant.

``labelled_page`` makes such a page; the emulated Vision endpoint can serve it through the real
client, so tests of batching, faults and caching need no model. It counts what it reads.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence

from PIL import Image, PngImagePlugin

from raybatch.models import PageText, ocr_origin
from raybatch.ocr.images import decode_bgr
from raybatch.ocr.port import PageImage

_TEXT_KEY = "raybatch:text"
_ROTATION_KEY = "raybatch:rotation"


def labelled_page(page: int, text: str, rotation: int = 0, size: tuple[int, int] = (60, 80)) -> PageImage:
    """A small blank PNG page carrying ``text`` and its upright ``rotation`` in its metadata."""
    info = PngImagePlugin.PngInfo()
    info.add_itxt(_TEXT_KEY, text)
    info.add_text(_ROTATION_KEY, str(rotation))
    out = io.BytesIO()
    width, height = size if rotation in (0, 180) else size[::-1]
    Image.new("L", (width, height), 255).save(out, format="PNG", pnginfo=info)
    return PageImage(page=page, image=out.getvalue())


class LabelledOcr:
    """Reads the label ``labelled_page`` stored; an unlabelled image reads as empty text."""

    def __init__(self, name: str = "labelled-1") -> None:
        self.name = name
        self.pages_read = 0
        self.calls = 0
        self._lock = threading.Lock()

    def read(self, pages: Sequence[PageImage]) -> list[PageText]:
        """The stored text and rotation of each page."""
        with self._lock:
            self.calls += 1
            self.pages_read += len(pages)
        return [self._read_one(page) for page in pages]

    def _read_one(self, page: PageImage) -> PageText:
        decode_bgr(page.image, page.page)  # an undecodable image fails as it would in a real engine
        with Image.open(io.BytesIO(page.image)) as img:
            meta = dict(getattr(img, "text", {}) or {})
        text = meta.get(_TEXT_KEY, "")
        return PageText(
            page=page.page,
            text=text,
            origin=ocr_origin(self.name),
            confidence=1.0 if text else 0.0,
            rotation=int(meta.get(_ROTATION_KEY, "0")),
        )

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
