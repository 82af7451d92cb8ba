"""Slice: one document's pages of an open source → its own PDF, each page turned upright, scanned
pages made searchable with the OCR's text (``raybatch.steps.searchable``).

Pure: a PyMuPDF document in, bytes out. The bytes depend only on the input (no dates, no random
file ids), so rewriting a document after a retry writes the same object.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import pymupdf
from pymupdf import mupdf

from raybatch.errors import InvalidSource, SourceProblem
from raybatch.steps.searchable import add_invisible_text

PRODUCER = "raybatch"
# The /Info dictionary every slice gets, as ``set_metadata`` would make it on a new document (the
# same bytes), written as one object: ``set_metadata`` sets each key on its own and reads all the
# metadata back after each, 0.19 ms of a small document's 0.42 ms save.
_INFO = f"<</Producer({PRODUCER})/Creator({PRODUCER})>>"
BUFFER_BYTES = 64 * 1024  # a saved slice's buffer to start with; MuPDF grows it as it writes


def slice_document(
    source: pymupdf.Document,
    first_page: int,
    last_page: int,
    rotations: Mapping[int, int],
    ocr_texts: Mapping[int, str] | None = None,
) -> bytes:
    """A new PDF of pages ``first_page..last_page`` (1-based, inclusive), each turned upright.

    ``rotations`` maps a source page to the clockwise degrees that make it upright, as the page
    is displayed (its own /Rotate included); pages it lacks stay as they are. ``ocr_texts`` maps a
    scanned source page to its OCR text, laid on the page as an invisible text layer.
    """
    if not 1 <= first_page <= last_page <= source.page_count:
        raise ValueError(f"pages {first_page}-{last_page} are not within 1-{source.page_count}")
    out = _copy_pages(source, first_page, last_page)
    try:
        for offset in range(out.page_count):
            page = out.load_page(offset)
            turn = upright_turn(rotations.get(first_page + offset, 0))
            if turn:
                page.set_rotation((page.rotation + turn) % 360)
        if _searchable(out, first_page, ocr_texts or {}):
            out.subset_fonts()
        return deterministic_bytes(out)
    finally:
        out.close()


def _searchable(out: pymupdf.Document, first_page: int, ocr_texts: Mapping[int, str]) -> bool:
    """Lay each scanned page's OCR text on it, invisibly; whether any page got text."""
    laid = False
    for page in sorted(ocr_texts):
        if 0 <= page - first_page < out.page_count:
            laid = add_invisible_text(out.load_page(page - first_page), ocr_texts[page]) or laid
    return laid


def _copy_pages(source: pymupdf.Document, first_page: int, last_page: int) -> pymupdf.Document:
    """A new document holding the pages; a damaged source is retried through a clean copy of it."""
    with contextlib.suppress(Exception):  # MuPDF's RuntimeError and kin, for a damaged object
        return _inserted(source, first_page, last_page)
    try:
        # A dangling reference that MuPDF's repair kept breaks the copy; a collected save drops it.
        decrypted = pymupdf.PDF_ENCRYPT_NONE  # type: ignore[attr-defined]  # set at import time
        clean = pymupdf.open("pdf", source.tobytes(garbage=3, encryption=decrypted))
        return _inserted(clean, first_page, last_page)
    except Exception as exc:
        raise InvalidSource(
            f"pages {first_page}-{last_page} cannot be copied", reason=SourceProblem.CORRUPT
        ) from exc


def _inserted(source: pymupdf.Document, first_page: int, last_page: int) -> pymupdf.Document:
    out = pymupdf.open()
    try:
        out.insert_pdf(source, from_page=first_page - 1, to_page=last_page - 1)
    except Exception:
        out.close()
        raise
    return out


def upright_turn(rotation: int) -> int:
    """A rotation normalised to 0, 90, 180 or 270; anything else is a caller's mistake."""
    if rotation % 90:
        raise ValueError(f"rotation must be a multiple of 90 degrees, not {rotation}")
    return rotation % 360


def deterministic_bytes(doc: pymupdf.Document) -> bytes:
    """The document saved compactly with fixed metadata and no file id: same input, same bytes."""
    info = doc.get_new_xref()
    doc.update_object(info, _INFO)
    doc.xref_set_key(-1, "Info", f"{info} 0 R")  # any /Info of the document's own is replaced
    doc.del_xml_metadata()
    return saved_bytes(doc)


def saved_bytes(doc: pymupdf.Document) -> bytes:
    """What ``doc.tobytes(garbage=3, deflate=True, no_new_id=True)`` gives, written into a MuPDF
    buffer: ``tobytes`` hands every piece of the file to a Python callback (some 300 calls for a
    one-page slice), 0.19 ms against 0.03. (``tobytes`` also tidies embedded files' names: a
    slice, pages copied into a new document, has none.)"""
    opts = mupdf.PdfWriteOptions()
    opts.do_garbage, opts.do_compress, opts.dont_regenerate_id = 3, 1, 1
    opts.do_encrypt, opts.permissions, opts.do_preserve_metadata = 1, 4095, 1  # tobytes' defaults
    pdf = mupdf.pdf_document_from_fz_document(doc.this)
    pdf.m_internal.resynth_required = 0  # as tobytes: annotations' appearances are not drawn again
    buffer = mupdf.FzBuffer(BUFFER_BYTES)
    out = mupdf.FzOutput(buffer)
    mupdf.pdf_write_document(pdf, out, opts)
    out.fz_close_output()
    return bytes(buffer.fz_buffer_extract())
