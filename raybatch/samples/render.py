"""Render a planned bundle to PDF bytes: digital pages with a text layer (drawn turned when the page
is rotated), image-only scans with noise and a slight skew, blank pages. Same plan ⇒ same bytes."""

from __future__ import annotations

import io
import random

import numpy as np
import pymupdf
from PIL import Image

from raybatch.samples.compose import MARGIN, PAGE_SIZES, Line, font, text_width
from raybatch.samples.plan import PlannedBundle, PlannedPage

SCAN_DPI = 150
JPEG_QUALITY = 65
PAPER_UNEVENNESS = 10  # ± grey levels, in soft blotches
SENSOR_NOISE = 2  # ± grey levels per pixel
MAX_SKEW_DEGREES = 1.8
FIXED_DATE = "D:20240101000000Z"
_TURNS = {90: Image.Transpose.ROTATE_90, 180: Image.Transpose.ROTATE_180, 270: Image.Transpose.ROTATE_270}


def physical_size(page: PlannedPage) -> tuple[float, float]:
    """Width and height of the page as it lies in the PDF (swapped when turned by 90 or 270)."""
    width, height = PAGE_SIZES[page.size]
    return (height, width) if page.rotation in (90, 270) else (width, height)


def _turn(rotation: int, width: float, height: float) -> pymupdf.Matrix:
    """Maps upright PDF space (y up) onto the physical page so the content needs ``rotation``° clockwise
    to read upright, i.e. it is drawn turned by ``rotation``° counter-clockwise."""
    return {
        0: pymupdf.Matrix(1, 0, 0, 1, 0, 0),
        90: pymupdf.Matrix(0, 1, -1, 0, height, 0),
        180: pymupdf.Matrix(-1, 0, 0, -1, width, height),
        270: pymupdf.Matrix(0, -1, 1, 0, 0, width),
    }[rotation]


def _writer(page: PlannedPage) -> pymupdf.TextWriter:
    """A text writer holding the page's lines, laid out upright."""
    width, height = PAGE_SIZES[page.size]
    writer = pymupdf.TextWriter(pymupdf.Rect(0, 0, width, height))
    y = MARGIN
    for line in page.lines:
        y += line.size * 1.5
        _append(writer, line, y, width)
    if page.footer:
        _append(writer, Line(page.footer, 10.0), height - MARGIN + 10.0, width)
    return writer


def _append(writer: pymupdf.TextWriter, line: Line, y: float, page_width: float) -> None:
    room = page_width - 2 * MARGIN
    size = min(line.size, line.size * room / max(text_width(line.text, line.size, line.bold), 1.0))
    writer.append((MARGIN, y), line.text, font=font(line.bold), fontsize=size)


def draw_digital(doc: pymupdf.Document, page: PlannedPage) -> None:
    """Append a page with a real text layer, turned as the plan says."""
    width, height = PAGE_SIZES[page.size]
    target = doc.new_page(width=physical_size(page)[0], height=physical_size(page)[1])
    if page.blank:
        return
    _writer(page).write_text(target, matrix=_turn(page.rotation, width, height))


def scan_image(page: PlannedPage, rng: random.Random) -> bytes:
    """The page printed, scanned at 150 dpi: grey paper, noise, a slight skew, turned; JPEG bytes."""
    width, height = PAGE_SIZES[page.size]
    scratch = pymupdf.open()
    upright = scratch.new_page(width=width, height=height)
    if not page.blank:
        _writer(page).write_text(upright)
    skew = rng.uniform(0.3, MAX_SKEW_DEGREES) * rng.choice((-1, 1))
    zoom = SCAN_DPI / 72
    # MuPDF draws the skew itself (fast, antialiased); the page is then cut back to its own size
    pix = upright.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom).prerotate(skew), colorspace=pymupdf.csGRAY)
    scratch.close()
    pixels = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width)
    rows, cols = round(height * zoom), round(width * zoom)
    top, left = (pix.height - rows) // 2, (pix.width - cols) // 2
    image = _noisy(pixels[top : top + rows, left : left + cols], np.random.default_rng(rng.getrandbits(64)))
    if page.rotation:
        image = image.transpose(_TURNS[page.rotation])  # counter-clockwise: needs rotation° clockwise
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=JPEG_QUALITY)
    return out.getvalue()


def _noisy(grey: np.ndarray, gen: np.random.Generator) -> Image.Image:
    """Grey paper with uneven tone, fine sensor noise and a few dark specks (kept mild: JPEG size)."""
    rows, cols = grey.shape
    pixels = grey.astype(np.int32) * 235 // 255 + 12
    blotches = gen.integers(
        128 - PAPER_UNEVENNESS, 129 + PAPER_UNEVENNESS, size=(rows // 16 + 1, cols // 16 + 1)
    )
    tone = Image.fromarray(blotches.astype(np.uint8)).resize((cols, rows), Image.Resampling.BILINEAR)
    pixels += np.asarray(tone, dtype=np.int32) - 128
    pixels += gen.integers(-SENSOR_NOISE, SENSOR_NOISE + 1, size=pixels.shape, dtype=np.int32)
    specks = gen.integers(0, pixels.size, size=pixels.size // 4000)
    pixels.reshape(-1)[specks] = gen.integers(40, 120, size=specks.size, dtype=np.int32)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))  # 2-D uint8: mode L


def draw_scan(doc: pymupdf.Document, page: PlannedPage, rng: random.Random) -> None:
    """Append an image-only page: no text layer at all."""
    width, height = physical_size(page)
    target = doc.new_page(width=width, height=height)
    target.insert_image(target.rect, stream=scan_image(page, rng), keep_proportion=False)


def render_bundle(bundle: PlannedBundle, seed: int) -> bytes:
    """The bundle's PDF bytes; deterministic for a given plan and seed."""
    rng = random.Random(f"raybatch-scans:{seed}:{bundle.file}")
    doc = pymupdf.open()
    for page in bundle.pages:
        if page.scanned:
            draw_scan(doc, page, rng)
        else:
            draw_digital(doc, page)
    doc.set_metadata(
        {
            "title": bundle.file,
            "author": "raybatch samples",
            "subject": "sample bundle",
            "creator": "raybatch",
            "producer": "raybatch",
            "creationDate": FIXED_DATE,
            "modDate": FIXED_DATE,
        }
    )
    doc.subset_fonts()
    data = doc.tobytes(garbage=4, deflate=True, no_new_id=True)
    doc.close()
    return data
