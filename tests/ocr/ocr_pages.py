"""Pages for the OCR tests: a few printed lines, rendered small (OCR is slow on 2 cores)."""

from __future__ import annotations

import io
from collections.abc import Sequence

import pymupdf
from PIL import Image

from raybatch.ocr.port import PageImage

ENGLISH = ["INVOICE No. 2024-117", "Acme Supplies Ltd, 12 High Street", "Total due: 1,250.00 EUR"]
RUSSIAN = ["СЧЁТ № 45 от 12.03.2024", "ООО «Ромашка», г. Москва", "Итого к оплате: 12 500,00 руб."]


def render(lines: Sequence[str], *, page: int = 1, rotation: int = 0, zoom: float = 1.4) -> PageImage:
    """Lines printed on the top of a half-height A4 page; turned so it needs ``rotation``° clockwise."""
    doc = pymupdf.open()
    sheet = doc.new_page(width=420, height=300)
    sheet.insert_font(fontname="F0", fontbuffer=pymupdf.Font("notos").buffer)
    for n, line in enumerate(lines):
        sheet.insert_text((30, 50 + 26 * n), line, fontname="F0", fontsize=13)
    png = sheet.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom)).tobytes("png")
    doc.close()
    upright = Image.open(io.BytesIO(png))
    out = io.BytesIO()
    upright.rotate(rotation, expand=True).save(out, format="PNG")  # PIL turns counter-clockwise
    return PageImage(page=page, image=out.getvalue())
