"""Thumbnail: a small upright WebP of the first page."""

from __future__ import annotations

import io

import pymupdf
import pytest
from PIL import Image, ImageStat

from raybatch.steps.slice import slice_document
from raybatch.steps.thumbnail import thumbnail

WIDTH, HEIGHT = 595, 842


def _doc(pages: int = 2, size: tuple[float, float] = (WIDTH, HEIGHT)) -> pymupdf.Document:
    doc = pymupdf.open()
    for n in range(pages):
        page = doc.new_page(width=size[0], height=size[1])
        page.insert_text((72, 200), f"page {n + 1}", fontsize=40)
    # A black bar along the first page's top edge tells which way is up.
    doc[0].draw_rect(pymupdf.Rect(0, 0, size[0], size[1] / 10), color=(0, 0, 0), fill=(0, 0, 0))
    return doc


def _open(webp: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(webp))
    assert image.format == "WEBP"
    return image.convert("L")


def _top_is_dark(image: Image.Image) -> bool:
    width, height = image.size
    top = image.crop((0, 0, width, max(1, height // 20)))
    bottom = image.crop((0, height - max(1, height // 20), width, height))
    return ImageStat.Stat(top).mean[0] < 60 and ImageStat.Stat(bottom).mean[0] > 200


@pytest.mark.parametrize("size", [(WIDTH, HEIGHT), (HEIGHT, WIDTH), (100, 2000)])
def test_long_edge_is_the_limit(size: tuple[float, float]) -> None:
    image = _open(thumbnail(_doc(1, size).tobytes(), long_edge=320))
    assert max(image.size) in (319, 320)
    assert (image.width < image.height) == (size[0] < size[1])


def test_first_page_of_pdf_bytes_upright() -> None:
    image = _open(thumbnail(_doc(2).tobytes()))
    assert image.size[1] > image.size[0]
    assert _top_is_dark(image)


@pytest.mark.parametrize("turn", [90, 180, 270])
def test_sliced_rotated_page_stays_upright(turn: int) -> None:
    source = _doc(1)
    source[0].set_rotation((360 - turn) % 360)  # the page now lies turned; ``turn`` makes it upright
    assert not _top_is_dark(_open(thumbnail(source)))
    assert _top_is_dark(_open(thumbnail(slice_document(source, 1, 1, {1: turn}))))
    assert _top_is_dark(_open(thumbnail(source[0], rotation=turn)))


def test_document_and_page_inputs_agree() -> None:
    doc = _doc(2)
    assert thumbnail(doc) == thumbnail(doc[0]) == thumbnail(doc.tobytes())
    assert not doc.is_closed


def test_same_input_same_bytes() -> None:
    data = _doc(1).tobytes()
    assert thumbnail(data, long_edge=200) == thumbnail(data, long_edge=200)


def test_rejects_nonsense_sizes() -> None:
    with pytest.raises(ValueError):
        thumbnail(_doc(1), long_edge=0)
    with pytest.raises(ValueError):
        thumbnail(_doc(1), rotation=45)
