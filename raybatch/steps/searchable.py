"""Searchable: an invisible text layer on a scanned page, as OCRmyPDF makes one.

The OCR's text is drawn with text render mode 3 (neither filled nor stroked): the page looks as it
did, and search, selection and text extraction find the words. The OCR port gives a page's text
without word boxes, so the text goes on as one block over the page, its lines in reading order,
sized to fit, upright as the page is shown. The font is Noto Sans (``pymupdf-fonts``: Latin and
Cyrillic), subset to the glyphs used.
"""

from __future__ import annotations

import functools

import pymupdf

FONT_NAME = "notos"
MAX_FONT_SIZE = 12.0
LINE_HEIGHT = 1.5  # of the font size: what one line of ``insert_text`` takes, with room to spare
MARGIN = 2.0


@functools.cache
def _font() -> pymupdf.Font:
    return pymupdf.Font(FONT_NAME)


def add_invisible_text(page: pymupdf.Page, text: str) -> bool:
    """Draw ``text`` invisibly over ``page`` (as shown, its rotation included); False when empty."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return False
    shown = page.rect
    longest = max(_font().text_length(line, fontsize=1) for line in lines)
    size = min(
        MAX_FONT_SIZE,
        (shown.height - 2 * MARGIN) / (len(lines) * LINE_HEIGHT),
        (shown.width - 2 * MARGIN) / max(longest, 1e-6),
    )
    page.insert_font(fontname=FONT_NAME, fontbuffer=_font().buffer)
    start = pymupdf.Point(MARGIN, MARGIN + size) * page.derotation_matrix
    page.insert_text(
        start,
        "\n".join(lines),
        fontsize=size,
        fontname=FONT_NAME,
        render_mode=3,
        rotate=page.rotation,
        lineheight=LINE_HEIGHT,
    )
    return True
