"""Slice: the right pages, turned upright the right way, text kept, the same bytes every time."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from raybatch.steps.searchable import add_invisible_text
from raybatch.steps.slice import saved_bytes, slice_document

WIDTH, HEIGHT = 595, 842
LINE = "Invoice No. 42 from Acme Trading"
# Where the top edge of content drawn at each angle lies on the unturned page, and where its text starts.
TOP_BAR = {
    0: (0, 0, WIDTH, 40),
    90: (0, 0, 40, HEIGHT),
    180: (0, HEIGHT - 40, WIDTH, HEIGHT),
    270: (WIDTH - 40, 0, WIDTH, HEIGHT),
}
ORIGIN = {0: (60, 300), 90: (300, 700), 180: (540, 500), 270: (300, 100)}
QPDF_CORPUS = Path(__file__).resolve().parents[1] / "data" / "qpdf"  # real damaged and encrypted PDFs


def _source(pages: int = 3) -> pymupdf.Document:
    doc = pymupdf.open()
    for n in range(pages):
        doc.new_page(width=WIDTH, height=HEIGHT).insert_text((72, 72), f"page {n + 1} of the bundle")
    return doc


def _lying_page(drawn: int) -> pymupdf.Document:
    """A page whose content lies turned (like a rotated scan): its text reads upright after +drawn°."""
    doc = pymupdf.open()
    page = doc.new_page(width=WIDTH, height=HEIGHT)
    page.insert_text(ORIGIN[drawn], LINE, fontsize=14, rotate=drawn)
    page.draw_rect(pymupdf.Rect(TOP_BAR[drawn]), color=(0, 0, 0), fill=(0, 0, 0))
    return doc


def _displayed_directions(page: pymupdf.Page) -> set[tuple[int, int]]:
    """Directions of the text lines as a reader sees the page (PyMuPDF reports them unturned)."""
    m = page.rotation_matrix
    turn = pymupdf.Matrix(m.a, m.b, m.c, m.d, 0, 0)
    found = set()
    for block in page.get_text("dict")["blocks"]:
        for line in block.get("lines", []):
            point = pymupdf.Point(line["dir"]) * turn
            found.add((round(point.x), round(point.y)))
    return found


def _dark_share(samples: bytes, width: int, rows: range) -> float:
    dark = sum(1 for row in rows for value in samples[row * width : (row + 1) * width] if value < 128)
    return dark / (len(rows) * width)


def test_slice_keeps_the_pages_and_their_text() -> None:
    sliced = pymupdf.open("pdf", slice_document(_source(5), 2, 4, {}))
    assert sliced.page_count == 3
    assert [page.get_text().strip() for page in sliced] == [f"page {n} of the bundle" for n in (2, 3, 4)]


def test_single_page_and_whole_document() -> None:
    source = _source(3)
    assert pymupdf.open("pdf", slice_document(source, 3, 3, {})).page_count == 1
    assert pymupdf.open("pdf", slice_document(source, 1, 3, {})).page_count == 3


@pytest.mark.parametrize("drawn", [0, 90, 180, 270])
def test_rotation_turns_the_page_upright(drawn: int) -> None:
    page = pymupdf.open("pdf", slice_document(_lying_page(drawn), 1, 1, {1: drawn}))[0]
    assert _displayed_directions(page) == {(1, 0)}
    assert page.get_text().strip() == LINE
    pix = page.get_pixmap(dpi=24, colorspace=pymupdf.csGRAY, alpha=False)
    assert (pix.width < pix.height) == (drawn in (0, 180))
    band = range(max(1, pix.height // 12))
    bottom = range(pix.height - len(band), pix.height)
    assert _dark_share(pix.samples, pix.width, band) > 0.5  # the content's top edge is on top
    assert _dark_share(pix.samples, pix.width, bottom) < 0.1


@pytest.mark.parametrize("drawn", [90, 180, 270])
def test_without_rotation_the_page_stays_turned(drawn: int) -> None:
    page = pymupdf.open("pdf", slice_document(_lying_page(drawn), 1, 1, {}))[0]
    assert _displayed_directions(page) != {(1, 0)}


def test_rotation_adds_to_the_page_own_rotate() -> None:
    source = _source(1)
    source[0].set_rotation(90)  # displayed text now runs downwards: 270 more makes it upright
    assert _displayed_directions(source[0]) == {(0, 1)}
    page = pymupdf.open("pdf", slice_document(source, 1, 1, {1: 270}))[0]
    assert page.rotation == 0
    assert _displayed_directions(page) == {(1, 0)}


def test_rotations_are_keyed_by_source_page() -> None:
    sliced = pymupdf.open("pdf", slice_document(_source(4), 2, 3, {1: 180, 3: 90, 4: 270}))
    assert [page.rotation for page in sliced] == [0, 90]


def test_same_input_gives_the_same_bytes() -> None:
    source = _source(3)
    first = slice_document(source, 1, 2, {2: 90})
    assert slice_document(source, 1, 2, {2: 90}) == first
    assert slice_document(_source(3), 1, 2, {2: 90}) == first
    meta = pymupdf.open("pdf", first).metadata
    assert not meta.get("creationDate") and not meta.get("modDate")
    assert b"/ID" not in first


def test_a_slice_names_raybatch_and_carries_none_of_the_source_metadata() -> None:
    source = _source(2)
    source.set_metadata({"title": "Payroll 2026", "author": "Jane Roe", "producer": "Scanner 9"})
    source.set_xml_metadata("<x:xmpmeta xmlns:x='adobe:ns:meta/'>Jane Roe</x:xmpmeta>")
    sliced = slice_document(pymupdf.open("pdf", source.tobytes()), 1, 1, {})
    meta = pymupdf.open("pdf", sliced).metadata
    named = (meta["producer"], meta["creator"], meta["title"], meta["author"])
    assert named == ("raybatch", "raybatch", "", "")
    assert b"Jane Roe" not in sliced and b"Payroll" not in sliced


def test_slice_leaves_the_source_untouched() -> None:
    source = _source(2)
    slice_document(source, 1, 2, {1: 90, 2: 180})
    assert [page.rotation for page in source] == [0, 0]


@pytest.mark.parametrize(("first", "last"), [(0, 1), (2, 1), (1, 4), (4, 4)])
def test_pages_outside_the_source_are_refused(first: int, last: int) -> None:
    with pytest.raises(ValueError, match="not within"):
        slice_document(_source(3), first, last, {})


def test_rotation_must_be_a_right_angle() -> None:
    with pytest.raises(ValueError, match="multiple of 90"):
        slice_document(_source(1), 1, 1, {1: 45})


def test_inherited_rotate_is_kept() -> None:
    path = QPDF_CORPUS / "inherited-rotate.pdf"
    source = pymupdf.open(path)
    sliced = pymupdf.open("pdf", slice_document(source, 1, 1, {}))
    assert sliced[0].rotation == source[0].rotation == 90


def test_damaged_source_with_a_dangling_reference_still_slices() -> None:
    path = QPDF_CORPUS / "bad34.pdf"  # opens and renders, but a plain page copy fails
    source = pymupdf.open(path)
    with pytest.raises(RuntimeError):
        pymupdf.open().insert_pdf(source)
    sliced = pymupdf.open("pdf", slice_document(source, 1, 1, {1: 90}))
    assert sliced[0].rotation == 90
    assert sliced[0].get_text() == source[0].get_text()


def test_every_openable_qpdf_file_slices_or_fails_with_a_reason() -> None:
    from raybatch.errors import InvalidSource
    from raybatch.steps.open_source import detect_kind, open_source, render_check

    files = sorted(QPDF_CORPUS.glob("*.pdf"))
    assert files
    sliced = 0
    for path in files:
        data = path.read_bytes()
        try:
            source = open_source(data, detect_kind(data), max_page_pixels=150_000_000)
            render_check(source)
        except InvalidSource:
            continue
        copy = pymupdf.open("pdf", slice_document(source, 1, source.page_count, {}))
        assert copy.page_count == source.page_count
        sliced += 1
    assert sliced > 80


def _copied(source: pymupdf.Document, turn: int = 0) -> pymupdf.Document:
    """What a slice saves: the source's pages in a new document, the first turned by ``turn``."""
    out = pymupdf.open()
    out.insert_pdf(source)
    out[0].set_rotation((out[0].rotation + turn) % 360)
    return out


def test_a_slice_is_saved_byte_for_byte_as_pymupdf_tobytes_saves_it() -> None:
    """Its own save (no Python callback for each piece of the file) must not change the files."""
    from raybatch.steps.open_source import detect_kind, open_source, render_check

    def same(make: object) -> bool:
        first, second = make(), make()  # type: ignore[operator]
        return saved_bytes(first) == second.tobytes(garbage=3, deflate=True, no_new_id=True)

    def searchable() -> pymupdf.Document:
        out = _copied(_source(2), 90)
        add_invisible_text(out[1], "Invoice 42 from Acme, scanned")
        out.subset_fonts()
        return out

    assert same(searchable)
    compared = 0
    for path in sorted(QPDF_CORPUS.glob("*.pdf")):
        data = path.read_bytes()
        try:
            source = open_source(data, detect_kind(data), max_page_pixels=150_000_000)
            render_check(source)
            _copied(source)
        except Exception:  # unopenable, or a copy that needs the clean path (above)
            continue
        assert same(lambda source=source: _copied(source, 180)), path.name
        compared += 1
    assert compared > 80
