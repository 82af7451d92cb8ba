"""Render: pages of an open source → images sized for Claude, the text layer, its direction.

Pure: a PyMuPDF document in, values out. Each page is checked against the pixel budget (the source
step's check) before anything is decoded, so a page bomb fails its job instead of the worker.
"""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass

import pymupdf
from PIL import Image

from raybatch.errors import InvalidSource
from raybatch.models import PageText, TextSource
from raybatch.settings import CLAUDE_MAX_LONG_EDGE, MAX_PAGE_PIXELS
from raybatch.steps.open_source import check_page, render_zoom

# Claude scales larger images down to about 1 600 tokens (width x height / 750): pixels past that
# cost bytes and upload time and add nothing. OCR still reads the full-size raster.
CLAUDE_MAX_PIXELS = 1600 * 750
MIN_TEXT_LAYER_CHARS = 16  # fewer visible characters than this is not a usable text layer

# Clockwise degrees that make the page upright, by the direction text runs (PyMuPDF: y grows down).
_UPRIGHT_BY_DIRECTION = {(1, 0): 0, (0, -1): 90, (-1, 0): 180, (0, 1): 270}


@dataclass(frozen=True)
class RenderOptions:
    """How pages are drawn for Claude."""

    long_edge: int = CLAUDE_MAX_LONG_EDGE
    image_format: str = "jpeg"
    quality: int = 80
    max_page_pixels: int = MAX_PAGE_PIXELS


@dataclass
class PageRaster:
    """A page drawn as it lies in the source (not yet turned upright)."""

    page: int
    image: Image.Image


def zoom_for(page: pymupdf.Page, long_edge: int, max_pixels: int | None = None) -> float:
    """The zoom that makes the page's long edge at most ``long_edge`` pixels (and its area at most
    ``max_pixels``, when given)."""
    rect = page.rect
    zoom = render_zoom(rect, long_edge)
    if max_pixels is not None:
        # a hair under: MuPDF rounds the pixmap's sides up
        zoom = min(zoom, 0.995 * (max_pixels / max(rect.width * rect.height, 1.0)) ** 0.5)
    return zoom


def rasterize(page: pymupdf.Page, options: RenderOptions, *, for_ocr: bool = True) -> PageRaster:
    """Draw one page in RGB: at the long-edge limit when OCR will read it, else only as large as
    Claude uses (about 1 600 tokens)."""
    check_page(page, max_page_pixels=options.max_page_pixels, long_edge=options.long_edge)
    zoom = zoom_for(page, options.long_edge, None if for_ocr else CLAUDE_MAX_PIXELS)
    try:
        pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False, colorspace=pymupdf.csRGB)
    except Exception as exc:  # MuPDF raises plain RuntimeError/ValueError for broken content
        raise InvalidSource(f"page {page.number + 1} cannot be rendered: {type(exc).__name__}") from exc
    image = Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
    return PageRaster(page=page.number + 1, image=image)


# The dict's usual flags without its images: a scanned page's picture is not copied out only to be
# skipped (the text comes out the same, in under half the time).
_TEXT_ONLY = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_IMAGES


def text_layer(page: pymupdf.Page) -> PageText:
    """The page's own text, in reading order once upright, and the rotation its direction implies."""
    lines: list[tuple[float, float, float, float, str]] = []
    directions: Counter[tuple[int, int]] = Counter()
    for block in page.get_text("dict", flags=_TEXT_ONLY).get("blocks", []):
        for line in block.get("lines", []):
            dx, dy = line["dir"]
            text = "".join(span["text"] for span in line["spans"])
            directions[(round(dx), round(dy))] += len(text.strip())
            x0, y0, x1, y1 = line["bbox"]
            lines.append(((x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0, text))
    rotation = _UPRIGHT_BY_DIRECTION.get(directions.most_common(1)[0][0], 0) if directions else 0
    text = _reading_order(lines, rotation)
    usable = usable_text(text)
    return PageText(
        page=page.number + 1,
        text=text if usable else "",
        origin=TextSource.LAYER if usable else TextSource.NONE,
        confidence=1.0 if usable else 0.0,
        rotation=rotation if usable else 0,
    )


def _reading_order(lines: list[tuple[float, float, float, float, str]], rotation: int) -> str:
    """Join lines top to bottom, left to right, as they read once the page is turned upright."""
    # (row position, position along the row, line height) in the upright frame
    frames = {
        0: lambda x, y, w, h: (y, x, h),
        90: lambda x, y, w, h: (x, -y, w),
        180: lambda x, y, w, h: (-y, -x, h),
        270: lambda x, y, w, h: (-x, y, w),
    }
    frame = frames[rotation]
    placed = [(*frame(x, y, w, h), text) for x, y, w, h, text in lines if text.strip()]
    placed.sort(key=lambda item: (item[0], item[1]))
    rows: list[list[tuple[float, str]]] = []
    last_row = None
    for row, along, height, text in placed:
        if last_row is None or row - last_row > max(height, 1.0) / 2:
            rows.append([])
            last_row = row
        rows[-1].append((along, text))
    return "\n".join(" ".join(t for _, t in sorted(row)) for row in rows)


def usable_text(text: str) -> bool:
    """Enough real characters to trust, and not mojibake from a broken font."""
    visible = [c for c in text if not c.isspace()]
    if len(visible) < MIN_TEXT_LAYER_CHARS:
        return False
    broken = sum(1 for c in visible if c == "\ufffd" or (ord(c) < 32))
    return broken / len(visible) < 0.1


def fit_for_claude(image: Image.Image, max_pixels: int = CLAUDE_MAX_PIXELS) -> Image.Image:
    """The image scaled down (aspect kept) to at most ``max_pixels``; unchanged when it fits."""
    pixels = image.width * image.height
    if pixels <= max_pixels:
        return image
    scale = (max_pixels / pixels) ** 0.5
    size = (max(1, int(image.width * scale)), max(1, int(image.height * scale)))
    return image.resize(size, Image.Resampling.BILINEAR, reducing_gap=2.0)


def upright(image: Image.Image, rotation: int) -> Image.Image:
    """Turn an image clockwise by ``rotation`` degrees (PIL turns counter-clockwise)."""
    return image.rotate(-rotation, expand=True) if rotation % 360 else image


def encode(image: Image.Image, image_format: str, quality: int) -> tuple[bytes, str]:
    """Encode for Claude: JPEG or WebP bytes and the media type."""
    out = io.BytesIO()
    if image_format == "webp":
        image.save(out, format="WEBP", quality=quality, method=4)
        return out.getvalue(), "image/webp"
    image.save(out, format="JPEG", quality=quality, optimize=True)
    return out.getvalue(), "image/jpeg"


def encode_png(image: Image.Image) -> bytes:
    """Lossless bytes for OCR engines."""
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=1)
    return out.getvalue()
