"""OCR: the port, its engines (Cloud Vision, Tesseract, RapidOCR), the per-page cache, the emulator.

``open_ocr(settings)`` picks the engine: with ``OCR_ENGINE=auto`` that is Cloud Vision when an
endpoint or Google credentials are configured (and the ``vision`` extra is installed), else the best
local engine installed (Tesseract with the corpus's languages, then RapidOCR from the ``rapidocr``
extra), else None: pages then go to Claude as images alone. An engine asked for by name whose extra
is missing is a ``ConfigError`` that names the extra.
"""

from __future__ import annotations

import importlib.util
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


# The optional engines: the module each needs, and the extra of raybatch that installs it.
EXTRAS = {
    OcrEngineName.RAPIDOCR: ("rapidocr", "rapidocr"),
    OcrEngineName.VISION: ("google.cloud.vision", "vision"),
}


def installed(engine: OcrEngineName) -> bool:
    """True when the packages of an optional engine (``rapidocr``, ``vision``) are installed."""
    module = EXTRAS[engine][0]
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package (``google``) is missing
        return False


def missing_extra(engine: OcrEngineName) -> str:
    """What to say when an optional engine is not installed: the extra that brings it."""
    return f"OCR engine {engine.value!r} is not installed: pip install 'raybatch[{EXTRAS[engine][1]}]'"


def open_ocr(settings: OcrSettings, *, threads: int = 0) -> OcrEngine | None:
    """The engine the settings ask for; None when no engine is wanted or none is installed."""
    choice = settings.ocr_engine
    if choice == OcrEngineName.NONE:
        return None
    if choice in EXTRAS and not installed(choice):
        raise ConfigError(f"OCR_ENGINE={choice.value}: {missing_extra(choice)}")
    if choice == OcrEngineName.VISION or (choice == OcrEngineName.AUTO and _auto_vision(settings)):
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
        from raybatch.ocr.rapid import RapidOcrEngine

        return RapidOcrEngine(threads=threads)
    return local_engine(settings.ocr_languages, threads=threads)


def _auto_vision(settings: OcrSettings) -> bool:
    """``auto`` takes Vision when it is configured and installed (a warning when only configured)."""
    if not (settings.vision_endpoint or settings.google_application_credentials):
        return False
    if not installed(OcrEngineName.VISION):
        log.warning("Vision is configured but %s; a local engine reads", missing_extra(OcrEngineName.VISION))
        return False
    return True


def local_engine(languages: str = "eng+rus", *, threads: int = 0) -> OcrEngine | None:
    """Tesseract when it has ``languages``, else RapidOCR (Latin script only), else None."""
    from raybatch.ocr.tesseract import TesseractOcrEngine, tesseract_available

    if tesseract_available(languages):
        return TesseractOcrEngine(languages, threads=threads)
    if not installed(OcrEngineName.RAPIDOCR):
        log.warning(
            "no local OCR engine: no tesseract with %s and osd, and %s; scanned pages go to Claude "
            "as images without text",
            languages,
            missing_extra(OcrEngineName.RAPIDOCR),
        )
        return None
    from raybatch.ocr.rapid import RapidOcrEngine

    if "rus" in languages.split("+"):
        log.warning("tesseract with %s is not installed: RapidOCR reads Latin script only", languages)
    return RapidOcrEngine(threads=threads)
