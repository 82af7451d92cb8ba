"""Source: kind by magic bytes, PDFs and images opened as PDFs, every refusal an InvalidSource."""

from __future__ import annotations

import io
import pickle
import struct
import zlib
from pathlib import Path

import pymupdf
import pytest
from PIL import Image

from raybatch.errors import InvalidSource, SourceProblem
from raybatch.models import SourceKind
from raybatch.steps.open_source import REASONS, detect_kind, open_source, render_check

QPDF_CORPUS = Path(__file__).resolve().parents[1] / "data" / "qpdf"  # real damaged and encrypted PDFs
BUDGET = 150_000_000


def _pdf(pages: int = 1, **save: object) -> bytes:
    doc = pymupdf.open()
    for n in range(pages):
        doc.new_page().insert_text((72, 72), f"page {n + 1}")
    return doc.tobytes(**save)


def _image(fmt: str, size: tuple[int, int] = (300, 400), **save: object) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, "white").save(out, format=fmt, **save)
    return out.getvalue()


def _png_header(width: int, height: int) -> bytes:
    """A PNG that claims a size in its header and holds almost no data: a decompression bomb's shape."""

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\0" * 16))
        + chunk(b"IEND", b"")
    )


def _reason(data: bytes, kind: SourceKind | None = None, budget: int = BUDGET) -> SourceProblem | None:
    with pytest.raises(InvalidSource) as info:
        open_source(data, kind or detect_kind(data), max_page_pixels=budget)
    return info.value.reason


def test_the_reason_leads_the_message_and_survives_pickling() -> None:
    exc = InvalidSource("the PDF needs a password", reason=SourceProblem.ENCRYPTED)
    assert str(exc) == "encrypted: the PDF needs a password"
    copy = pickle.loads(pickle.dumps(exc))
    assert (copy.reason, str(copy)) == (SourceProblem.ENCRYPTED, str(exc))
    assert InvalidSource("no reason").reason is None


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"%PDF-1.7\n...", SourceKind.PDF),
        (b"\n\n  %PDF-1.4 junk before the header", SourceKind.PDF),
        (b"\xff\xd8\xff\xe0rest", SourceKind.IMAGE),
        (b"\x89PNG\r\n\x1a\nrest", SourceKind.IMAGE),
        (b"II*\x00rest", SourceKind.IMAGE),
        (b"MM\x00*rest", SourceKind.IMAGE),
    ],
)
def test_detect_kind_by_magic(data: bytes, kind: SourceKind) -> None:
    assert detect_kind(data) is kind


@pytest.mark.parametrize("data", [b"PK\x03\x04zip", b"GIF89a....", b"hello, world", b"<html>"])
def test_detect_kind_refuses_other_files(data: bytes) -> None:
    with pytest.raises(InvalidSource, match="not a PDF or image") as info:
        detect_kind(data)
    assert info.value.reason == SourceProblem.UNSUPPORTED


def test_detect_kind_refuses_empty_file() -> None:
    with pytest.raises(InvalidSource) as info:
        detect_kind(b"")
    assert info.value.reason == SourceProblem.EMPTY


def test_pdf_opens_with_its_pages() -> None:
    doc = open_source(_pdf(3), SourceKind.PDF, max_page_pixels=BUDGET)
    assert doc.page_count == 3
    assert doc[2].get_text().strip() == "page 3"


def test_encrypted_pdf_needs_password() -> None:
    data = _pdf(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="secret", owner_pw="owner")
    assert _reason(data) == SourceProblem.ENCRYPTED


def test_owner_password_only_opens_with_empty_user_password() -> None:
    data = _pdf(2, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="", owner_pw="owner")
    assert open_source(data, SourceKind.PDF, max_page_pixels=BUDGET).page_count == 2


def _zero_page_pdf() -> bytes:
    """A well-formed PDF whose page tree has no kids (PyMuPDF refuses to save one)."""
    objects = [b"<</Type/Catalog/Pages 2 0 R>>", b"<</Type/Pages/Kids[]/Count 0>>"]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 3\n0000000000 65535 f \n"
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<</Size 3/Root 1 0 R>>\nstartxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def test_zero_page_pdf_is_empty() -> None:
    assert _reason(_zero_page_pdf()) == SourceProblem.EMPTY


def test_damaged_pdf_without_pages_is_corrupt() -> None:
    assert _reason(_zero_page_pdf().replace(b"xref", b"xxxx")) == SourceProblem.CORRUPT


@pytest.mark.parametrize("cut", [20, 200])
def test_truncated_pdf_is_corrupt_or_opens_repaired(cut: int) -> None:
    data = _pdf(2)[:cut]
    with pytest.raises(InvalidSource) as info:
        open_source(data, SourceKind.PDF, max_page_pixels=BUDGET)
    assert info.value.reason in {SourceProblem.CORRUPT, SourceProblem.EMPTY}


def test_garbage_claiming_to_be_pdf_is_corrupt() -> None:
    assert _reason(b"%PDF-1.4\n" + bytes(range(256)) * 8, SourceKind.PDF) in {
        SourceProblem.CORRUPT,
        SourceProblem.EMPTY,
    }


def test_oversized_page_is_refused_before_rendering() -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_image(page.rect, stream=_image("PNG", (3000, 2000)))
    assert _reason(doc.tobytes(), budget=1_000_000) == SourceProblem.OVERSIZED
    assert open_source(doc.tobytes(), SourceKind.PDF, max_page_pixels=10_000_000).page_count == 1


def test_page_area_at_render_scale_counts() -> None:
    with pytest.raises(InvalidSource, match="over the budget"):
        open_source(_pdf(1), SourceKind.PDF, max_page_pixels=1_000_000, long_edge=1568)
    assert open_source(_pdf(1), SourceKind.PDF, max_page_pixels=1_000_000, long_edge=1000).page_count == 1


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "TIFF"])
def test_image_becomes_one_page_pdf(fmt: str) -> None:
    doc = open_source(_image(fmt, (600, 900), dpi=(200, 200)), SourceKind.IMAGE, max_page_pixels=BUDGET)
    assert doc.page_count == 1
    assert doc.is_pdf
    assert (round(doc[0].rect.width), round(doc[0].rect.height)) == (216, 324)  # 600 px at 200 dpi
    render_check(doc)


def test_image_without_believable_dpi_is_taken_at_300_dpi() -> None:
    doc = open_source(_image("PNG", (2480, 3508)), SourceKind.IMAGE, max_page_pixels=BUDGET)
    assert (round(doc[0].rect.width), round(doc[0].rect.height)) == (595, 842)  # A4


def test_jpeg_stays_jpeg_inside_the_pdf() -> None:
    doc = open_source(_image("JPEG", (500, 700)), SourceKind.IMAGE, max_page_pixels=BUDGET)
    (image,) = doc[0].get_images(full=True)
    assert image[8] == "DCTDecode"
    assert (image[2], image[3]) == (500, 700)


def test_multipage_tiff_becomes_one_page_per_frame() -> None:
    out = io.BytesIO()
    frames = [Image.new("L", (400, 300), 255), Image.new("1", (200, 500), 1)]
    Image.new("RGB", (300, 400), "white").save(
        out, format="TIFF", save_all=True, append_images=frames, dpi=(100, 100)
    )
    doc = open_source(out.getvalue(), SourceKind.IMAGE, max_page_pixels=BUDGET)
    sizes = [(round(page.rect.width), round(page.rect.height)) for page in doc]
    assert sizes == [(216, 288), (288, 216), (144, 360)]
    render_check(doc)


def test_image_over_budget_is_refused_from_its_header() -> None:
    assert _reason(_image("PNG", (2000, 1000)), budget=1_000_000) == SourceProblem.OVERSIZED


@pytest.mark.parametrize("side", [10_000, 100_000])
def test_decompression_bomb_is_refused_without_decoding(side: int) -> None:
    # 10 000² trips Pillow's warning, 100 000² its error: both end as our reason, nothing decoded.
    assert _reason(_png_header(side, side), budget=50_000_000) == SourceProblem.OVERSIZED


def test_truncated_image_is_corrupt() -> None:
    assert _reason(_image("PNG", (300, 300))[:40], SourceKind.IMAGE) == SourceProblem.CORRUPT
    assert _reason(b"\xff\xd8\xff\xe0" + b"\0" * 10, SourceKind.IMAGE) == SourceProblem.CORRUPT


def test_messages_never_quote_contents() -> None:
    data = b"%PDF-1.4\nSECRET-PAYLOAD " * 10
    with pytest.raises(InvalidSource) as info:
        open_source(data, SourceKind.PDF, max_page_pixels=BUDGET)
    assert "SECRET" not in str(info.value)
    assert info.value.reason in REASONS


def _qpdf_files() -> list[Path]:
    return sorted(QPDF_CORPUS.glob("*.pdf"))


@pytest.mark.timeout(30)
@pytest.mark.parametrize("path", _qpdf_files(), ids=lambda p: p.name)
def test_qpdf_corpus_opens_and_renders_or_fails_with_a_reason(path: Path) -> None:
    data = path.read_bytes()
    try:
        doc = open_source(data, detect_kind(data), max_page_pixels=BUDGET)
        assert doc.page_count >= 1
        render_check(doc)
    except InvalidSource as exc:
        assert exc.reason in REASONS, str(exc)


def test_qpdf_corpus_is_there() -> None:
    assert len(_qpdf_files()) > 100
