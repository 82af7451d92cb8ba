"""The prepare step draws a page only when something needs its image: OCR, or Claude."""

from __future__ import annotations

import pymupdf
import pytest

from raybatch.models import JobRecord, JobStatus, SourceKind
from raybatch.settings import ClaudeSettings, OcrSettings, PrepareSettings
from raybatch.steps import render
from raybatch.steps.chunk import ChunkPlan
from raybatch.work import prepare
from raybatch.work.prepare import ChunkPreparer


def _two_pages() -> bytes:
    """Page 1 has a text layer; page 2 is blank (no text: it can only go as an image)."""
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "INVOICE No. 000042 from Supplier 7, amount 142.00 EUR")
    doc.new_page()
    data = doc.tobytes()
    doc.close()
    return data


def _job(data: bytes) -> JobRecord:
    return JobRecord(1, "0" * 64, "file:///x.pdf", "x.pdf", SourceKind.PDF, len(data), JobStatus.PREPARING)


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pages the prepare step rasterizes, in order."""
    pages: list[int] = []

    def counted(page: pymupdf.Page, *args: object, **kwargs: object) -> render.PageRaster:
        pages.append(page.number + 1)
        return render.rasterize(page, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(prepare, "rasterize", counted)
    return pages


@pytest.mark.parametrize(("modality", "expected"), [("adaptive", [2]), ("text", [2]), ("images", [1, 2])])
def test_a_page_sent_as_its_text_alone_is_not_drawn(
    drawn: list[int], modality: str, expected: list[int]
) -> None:
    data = _two_pages()
    preparer = ChunkPreparer(PrepareSettings(page_modality=modality), ClaudeSettings(), OcrSettings(), None)
    chunk = preparer.prepare(_job(data), ChunkPlan(0, 1, 2), data)
    assert drawn == expected
    blocks = chunk.request.params["messages"][0]["content"]
    images = [block for block in blocks if block["type"] == "image"]
    assert len(images) == len(expected)
    assert all(block["source"]["data"] for block in images)
