"""Source: a file's bytes → an open PDF, or ``InvalidSource`` with a reason.

Images (JPEG, PNG, TIFF with any number of frames) become a PDF with one page per frame. Sizes are
checked before anything is decoded or rendered, so a pixel bomb fails its job instead of its worker.
Every ``InvalidSource`` carries one of the ``REASONS`` (its ``reason``, also first in its message),
then says why in words; it never quotes the file's contents.
"""

from __future__ import annotations

import io
import re
import warnings

import pymupdf
from PIL import Image

from raybatch.errors import InvalidSource, SourceProblem
from raybatch.models import SourceKind
from raybatch.settings import CLAUDE_MAX_LONG_EDGE

# The reasons this module's InvalidSource carries.
REASONS = (
    SourceProblem.ENCRYPTED,
    SourceProblem.CORRUPT,
    SourceProblem.EMPTY,
    SourceProblem.OVERSIZED,
    SourceProblem.UNSUPPORTED,
)

MAX_RENDER_ZOOM = 300 / 72  # and its finest scale
ASSUMED_DPI = 300.0  # a scan that states no believable resolution
_BELIEVABLE_DPI = (98.0, 2400.0)  # 72 and 96 are what software writes when it does not know

# PDF syntax in a file that lost its header: a damaged PDF (MuPDF may even repair it), not "other".
_PDF_SYNTAX = re.compile(rb"\d+\s+\d+\s+obj\b|\btrailer\s*<<|\bstartxref\b")

_IMAGE_MAGIC = (
    (b"\xff\xd8\xff", "jpeg"),
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
    (b"II+\x00", "tiff"),  # BigTIFF
    (b"MM\x00+", "tiff"),
)


def image_format(data: bytes) -> str | None:
    """``jpeg``, ``png`` or ``tiff`` by magic bytes; None for anything else."""
    for magic, name in _IMAGE_MAGIC:
        if data.startswith(magic):
            return name
    return None


def detect_kind(data: bytes) -> SourceKind:
    """PDF or image, by magic bytes (or PDF syntax after a lost header); else an ``InvalidSource``."""
    if not data:
        raise InvalidSource("the file has no bytes", reason=SourceProblem.EMPTY)
    # The PDF header may follow some junk; readers (MuPDF included) look in the first KiB.
    if b"%PDF-" in data[:1024]:
        return SourceKind.PDF
    if image_format(data) is not None:
        return SourceKind.IMAGE
    if _PDF_SYNTAX.search(data[:4096]):
        return SourceKind.PDF
    raise InvalidSource("not a PDF or image (JPEG, PNG, TIFF)", reason=SourceProblem.UNSUPPORTED)


def open_source(
    data: bytes,
    kind: SourceKind,
    *,
    max_page_pixels: int,
    long_edge: int = CLAUDE_MAX_LONG_EDGE,
    checked: bool = False,
) -> pymupdf.Document:
    """An open PDF of the source, every page checked against the pixel budget before any rendering,
    unless ``checked``: these very bytes (by sha256) passed the check already.

    ``long_edge`` is the render step's long edge: a page's pixel count "at render scale" is its
    size drawn that long (never finer than 300 dpi). Embedded images count at their decoded size.
    """
    doc = _image_to_pdf(data, max_page_pixels) if kind == SourceKind.IMAGE else _open_pdf(data)
    if checked:
        return doc
    try:
        check_pages(doc, max_page_pixels=max_page_pixels, long_edge=long_edge)
    except InvalidSource:
        doc.close()
        raise
    return doc


def check_pages(
    doc: pymupdf.Document, *, max_page_pixels: int, long_edge: int = CLAUDE_MAX_LONG_EDGE
) -> None:
    """Refuse a page that would render, or whose images would decode, past the pixel budget."""
    for number in range(doc.page_count):
        try:
            page = doc.load_page(number)
        except Exception as exc:  # a damaged page tree makes MuPDF raise several kinds of error
            raise InvalidSource(f"page {number + 1} cannot be read", reason=SourceProblem.CORRUPT) from exc
        check_page(page, max_page_pixels=max_page_pixels, long_edge=long_edge)


def check_page(page: pymupdf.Page, *, max_page_pixels: int, long_edge: int = CLAUDE_MAX_LONG_EDGE) -> None:
    """Refuse one page that would render, or whose images would decode, past the pixel budget."""
    try:
        rendered = render_pixels(page.rect, long_edge)
        embedded = sum(int(info[2]) * int(info[3]) for info in page.get_images(full=True))
    except Exception as exc:  # a damaged page makes MuPDF raise several kinds of error
        raise InvalidSource(f"page {page.number + 1} cannot be read", reason=SourceProblem.CORRUPT) from exc
    worst = max(rendered, embedded)
    if worst > max_page_pixels:
        raise InvalidSource(
            f"page {page.number + 1} needs {worst:,} pixels, over the budget of {max_page_pixels:,}",
            reason=SourceProblem.OVERSIZED,
        )


def render_zoom(rect: pymupdf.Rect, long_edge: int) -> float:
    """The zoom that draws a page with its long edge at ``long_edge`` (never finer than 300 dpi)."""
    return min(long_edge / max(rect.width, rect.height, 1.0), MAX_RENDER_ZOOM)


def render_pixels(rect: pymupdf.Rect, long_edge: int) -> int:
    """Pixels of a page drawn with its long edge at ``long_edge`` (never finer than 300 dpi)."""
    zoom = render_zoom(rect, long_edge)
    return round(rect.width * zoom) * round(rect.height * zoom)


def render_check(doc: pymupdf.Document, *, long_edge: int = 64) -> None:
    """Draw every page small; a page MuPDF cannot draw is an ``InvalidSource``."""
    for number in range(doc.page_count):
        try:
            page = doc.load_page(number)
            zoom = long_edge / max(page.rect.width, page.rect.height, 1.0)
            page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
        except Exception as exc:  # MuPDF reports broken content as RuntimeError, ValueError, ...
            raise InvalidSource(
                f"page {number + 1} cannot be rendered", reason=SourceProblem.CORRUPT
            ) from exc


def _open_pdf(data: bytes) -> pymupdf.Document:
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except Exception as exc:  # FileDataError, EmptyFileError, or a bare RuntimeError from MuPDF
        raise InvalidSource("the file cannot be opened as a PDF", reason=SourceProblem.CORRUPT) from exc
    # Owner-password-only files open with the empty user password; anything else needs a secret.
    if doc.needs_pass and not doc.authenticate(""):
        doc.close()
        raise InvalidSource("the PDF needs a password", reason=SourceProblem.ENCRYPTED)
    try:
        pages = doc.page_count
    except Exception as exc:
        doc.close()
        raise InvalidSource("the page tree cannot be read", reason=SourceProblem.CORRUPT) from exc
    if pages == 0:
        damaged = doc.is_repaired
        doc.close()
        if damaged:
            raise InvalidSource(
                "the PDF is damaged and no page could be recovered", reason=SourceProblem.CORRUPT
            )
        raise InvalidSource("the PDF has no pages", reason=SourceProblem.EMPTY)
    return doc


def _image_to_pdf(data: bytes, max_page_pixels: int) -> pymupdf.Document:
    fmt = image_format(data)
    if fmt is None:
        raise InvalidSource("not a PDF or image (JPEG, PNG, TIFF)", reason=SourceProblem.UNSUPPORTED)
    sizes = _page_sizes(data, fmt, max_page_pixels)
    try:
        with pymupdf.open(stream=data, filetype=fmt) as images:
            converted = pymupdf.open("pdf", images.convert_to_pdf())
    except Exception as exc:  # a damaged image body only shows when MuPDF decodes it
        raise InvalidSource(
            f"the {fmt.upper()} image cannot be decoded", reason=SourceProblem.CORRUPT
        ) from exc
    if converted.page_count != len(sizes):
        raise InvalidSource(
            f"the {fmt.upper()} image's frames cannot all be read", reason=SourceProblem.CORRUPT
        )
    doc = pymupdf.open()
    for number, (width, height) in enumerate(sizes):
        # MuPDF sizes pages at 96 dpi when the image says nothing; redraw at the resolution we trust.
        page = doc.new_page(width=width, height=height)
        page.show_pdf_page(page.rect, converted, number, keep_proportion=False)
    converted.close()
    return doc


def _page_sizes(data: bytes, fmt: str, max_page_pixels: int) -> list[tuple[float, float]]:
    """Each frame's page size in points, read from the headers alone (nothing is decoded)."""
    with warnings.catch_warnings():
        # We check the pixel count ourselves, against our own budget.
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(data), formats=[fmt.upper()]) as image:
                frames = getattr(image, "n_frames", 1) if fmt == "tiff" else 1
                sizes = []
                for frame in range(frames):
                    image.seek(frame)
                    _check_frame(image.size, frame, max_page_pixels)
                    sizes.append(_points(image.size, image.info.get("dpi")))
                return sizes
        except Image.DecompressionBombError as exc:
            raise InvalidSource(
                "the image is far over the pixel budget", reason=SourceProblem.OVERSIZED
            ) from exc
        except InvalidSource:
            raise
        except Exception as exc:  # Pillow raises OSError, SyntaxError, ValueError, struct.error, ...
            raise InvalidSource(
                f"the {fmt.upper()} header cannot be read", reason=SourceProblem.CORRUPT
            ) from exc


def _check_frame(size: tuple[int, int], frame: int, max_page_pixels: int) -> None:
    width, height = size
    if width <= 0 or height <= 0:
        raise InvalidSource(f"image frame {frame + 1} has no pixels", reason=SourceProblem.CORRUPT)
    if width * height > max_page_pixels:
        raise InvalidSource(
            f"image frame {frame + 1} is {width}x{height} pixels, over the budget of {max_page_pixels:,}",
            reason=SourceProblem.OVERSIZED,
        )


def _points(size: tuple[int, int], dpi: object) -> tuple[float, float]:
    low, high = _BELIEVABLE_DPI
    xdpi = ydpi = ASSUMED_DPI
    if isinstance(dpi, tuple) and len(dpi) == 2:
        x, y = (float(v) for v in dpi)
        if low <= x <= high and low <= y <= high:
            xdpi, ydpi = x, y
    return size[0] * 72 / xdpi, size[1] * 72 / ydpi
