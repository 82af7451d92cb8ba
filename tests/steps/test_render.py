"""Render: sizes for Claude, text layer and its direction, the pixel budget."""

from __future__ import annotations

import io

import pymupdf
import pytest
from PIL import Image

from raybatch.errors import InvalidSource
from raybatch.steps.render import RenderOptions, encode, rasterize, text_layer, upright

LINE = "Invoice No. 42 from Acme Trading for services rendered"


def _doc_with_text(rotate: int, size: tuple[float, float] = (595, 842)) -> pymupdf.Document:
    doc = pymupdf.open()
    page = doc.new_page(width=size[0], height=size[1])
    origin = {0: (60, 300), 90: (300, 700), 180: (540, 500), 270: (300, 100)}[rotate]
    page.insert_text(origin, LINE, fontsize=14, rotate=rotate)
    shift = {0: (0, 30), 90: (30, 0), 180: (0, -30), 270: (-30, 0)}[rotate]
    page.insert_text((origin[0] + shift[0], origin[1] + shift[1]), "second line", fontsize=14, rotate=rotate)
    return doc


@pytest.mark.parametrize(("drawn", "upright_rotation"), [(0, 0), (90, 90), (180, 180), (270, 270)])
def test_text_layer_direction_gives_upright_rotation(drawn: int, upright_rotation: int) -> None:
    page_text = text_layer(_doc_with_text(drawn)[0])
    assert page_text.origin == "layer"
    assert page_text.text.splitlines() == [LINE, "second line"]
    assert page_text.rotation == upright_rotation


def test_blank_page_has_no_usable_text() -> None:
    doc = pymupdf.open()
    doc.new_page()
    page_text = text_layer(doc[0])
    assert (page_text.origin, page_text.text, page_text.confidence) == ("none", "", 0.0)


@pytest.mark.parametrize("size", [(595, 842), (842, 595), (420, 595), (2000, 3000), (100, 150)])
def test_long_edge_never_exceeds_limit(size: tuple[float, float]) -> None:
    raster = rasterize(_doc_with_text(0, size)[0], RenderOptions(long_edge=1568))
    assert max(raster.image.size) <= 1568
    assert raster.page == 1


def test_pixel_budget_is_checked_before_rendering() -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    big = Image.new("L", (3000, 2000), 255)
    buf = io.BytesIO()
    big.save(buf, format="PNG")
    page.insert_image(page.rect, stream=buf.getvalue())
    with pytest.raises(InvalidSource, match="over the budget"):
        rasterize(doc[0], RenderOptions(max_page_pixels=1_000_000))
    assert rasterize(doc[0], RenderOptions(max_page_pixels=10_000_000)).image.size[0] > 0


def test_upright_turns_clockwise() -> None:
    image = Image.new("RGB", (40, 10), "white")
    image.putpixel((0, 0), (255, 0, 0))  # top-left marker
    turned = upright(image, 90)
    assert turned.size == (10, 40)
    assert turned.getpixel((9, 0)) == (255, 0, 0)  # top-left goes to top-right when turned clockwise


@pytest.mark.parametrize(("fmt", "media"), [("jpeg", "image/jpeg"), ("webp", "image/webp")])
def test_encode_formats(fmt: str, media: str) -> None:
    data, media_type = encode(Image.new("RGB", (64, 32), "white"), fmt, 80)
    assert media_type == media
    assert Image.open(io.BytesIO(data)).size == (64, 32)


def test_images_for_claude_stay_within_about_1600_tokens() -> None:
    from raybatch.steps.render import CLAUDE_MAX_PIXELS, fit_for_claude

    a4 = Image.new("RGB", (1109, 1568), "white")
    fitted = fit_for_claude(a4)
    assert fitted.width * fitted.height <= CLAUDE_MAX_PIXELS
    assert abs(fitted.width / fitted.height - 1109 / 1568) < 0.01
    small = Image.new("RGB", (800, 600), "white")
    assert fit_for_claude(small) is small


def test_pages_nobody_will_ocr_are_drawn_only_as_large_as_claude_uses() -> None:
    from raybatch.steps.render import CLAUDE_MAX_PIXELS

    page = _doc_with_text(0)[0]
    for_claude = rasterize(page, RenderOptions(), for_ocr=False).image
    for_ocr = rasterize(page, RenderOptions(), for_ocr=True).image
    assert for_claude.width * for_claude.height <= CLAUDE_MAX_PIXELS < for_ocr.width * for_ocr.height
    assert max(for_ocr.size) == 1568
