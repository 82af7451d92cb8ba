"""A prepared chunk and its summary: what crosses from a prepare task to the driver and the
coordinator. Apart from ``prepare`` so that unpickling one imports no renderer or OCR engine."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from raybatch.claude.records import PreparedRequest
from raybatch.models import CachedPage, ChunkRecord, ChunkStatus


@dataclass(frozen=True)
class PreparedChunk:
    """A chunk ready for Claude, plus what the writer needs later: each page's detected rotation."""

    request: PreparedRequest
    rotations: Mapping[int, int]
    pages_without_text: tuple[int, ...] = ()
    ocr_pages: tuple[int, ...] = ()
    emulated: bool = False

    def record(self) -> ChunkRecord:
        """The chunk's row: prepared, with its size and rotations."""
        request = self.request
        return ChunkRecord(
            job_id=request.job_id,
            n=request.n,
            first_page=request.first_page,
            last_page=request.last_page,
            custom_id=request.custom_id,
            processing_key=request.processing_key,
            status=ChunkStatus.PREPARED,
            request_bytes=request.encoded_size,
            rotations=dict(self.rotations),
            emulated=self.emulated,
        )

    def summary(self, ocr_reads: Sequence[CachedPage] = ()) -> ChunkSummary:
        """What the driver needs to know, without the payload; ``ocr_reads`` go to its cache."""
        return ChunkSummary(
            self.record(), len(self.pages_without_text), len(self.ocr_pages), tuple(ocr_reads)
        )


@dataclass(frozen=True)
class ChunkSummary:
    """A prepared chunk's row, page counts and new OCR reads: small enough to return to the driver."""

    record: ChunkRecord
    pages_without_text: int
    ocr_pages: int
    ocr_reads: tuple[CachedPage, ...] = ()
