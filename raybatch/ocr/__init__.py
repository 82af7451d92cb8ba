"""OCR: the port, its engines (Cloud Vision, Tesseract, RapidOCR), the per-page cache, the emulator.

``open_ocr(settings)`` picks the engine: with ``OCR_ENGINE=auto`` that is Cloud Vision when an
endpoint or Google credentials are configured, else the best local engine installed (Tesseract
with the corpus's languages, then RapidOCR), else None: pages then go to Claude as images alone.
"""

from __future__ import annotations

import logging

from raybatch.errors import ConfigError
from raybatch.ocr.cache import CachedOcr, InMemoryPageTextCache, PageTextCache
from raybatch.ocr.port import OcrEngine, PageImage
from raybatch.settings import OcrEngineName, OcrSettings

__all__ = [
    "CachedOcr",
    "InMemoryPageTextCache",
    "OcrEngine",
    "PageImage",
    "PageTextCache",
    "local_engine",
    "open_ocr",
]

log = logging.getLogger(__name__)


def open_ocr(settings: OcrSettings, *, threads: int = 0) -> OcrEngine | None:
    """The engine the settings ask for; None when no engine is wanted or none is installed."""
    choice = settings.ocr_engine
    if choice == OcrEngineName.NONE:
        return None
    if choice == OcrEngineName.VISION or (
        choice == OcrEngineName.AUTO and (settings.vision_endpoint or settings.google_application_credentials)
    ):
        from raybatch.ocr.vision import GoogleVisionOcr

        return GoogleVisionOcr(
            endpoint=settings.vision_endpoint,
            concurrency=settings.vision_concurrency,
            batch_pages=settings.vision_batch_pages,
            credentials_file=settings.google_application_credentials,
        )
    if choice == OcrEngineName.TESSERACT:
        from raybatch.ocr.tesseract import TesseractOcrEngine

        return TesseractOcrEngine(settings.ocr_languages, threads=threads)
    if choice == OcrEngineName.RAPIDOCR:
        from raybatch.ocr.rapid import RapidOcrEngine, model_dir

        model_dir()  # a clear ConfigError now when rapidocr is missing
        return RapidOcrEngine(threads=threads)
    return local_engine(settings.ocr_languages, threads=threads)


def local_engine(languages: str = "eng+rus", *, threads: int = 0) -> OcrEngine | None:
    """Tesseract when it has ``languages``, else RapidOCR (Latin script only), else None."""
    from raybatch.ocr.tesseract import TesseractOcrEngine, tesseract_available

    if tesseract_available(languages):
        return TesseractOcrEngine(languages, threads=threads)
    try:
        from raybatch.ocr.rapid import RapidOcrEngine, model_dir

        model_dir()
    except ConfigError:
        log.warning("no local OCR engine installed: scanned pages go to Claude as images without text")
        return None
    if "rus" in languages.split("+"):
        log.warning("tesseract with %s is not installed: RapidOCR reads Latin script only", languages)
    return RapidOcrEngine(threads=threads)
