"""Prepare: one chunk of a source → a Claude request. The body of the ``prepare`` Ray tasks.

Sequences the pure steps (open, render, text layer, build request) and the OCR port (cached per
page). Plain Python: the pipeline wraps it in ``ray.remote``; tests call it directly.
"""

from __future__ import annotations

from collections.abc import Sequence

from raybatch.models import (
    JobRecord,
    PageText,
    RenderedPage,
    TextSource,
)
from raybatch.ocr.cache import CachedOcr, PageTextCache
from raybatch.ocr.port import OcrEngine, PageImage
from raybatch.settings import OcrSettings, PrepareSettings, RequestSettings
from raybatch.steps.build_requests import build_request, request_config, sends_image
from raybatch.steps.chunk import ChunkPlan
from raybatch.steps.open_source import open_source
from raybatch.steps.render import (
    PageRaster,
    RenderOptions,
    encode,
    encode_png,
    fit_for_claude,
    rasterize,
    text_layer,
    upright,
)
from raybatch.units import MIB
from raybatch.work.prepared_chunk import PreparedChunk

# Rough resident cost of preparing one page: the raster, its PNG for OCR, the encoded image.
BYTES_PER_PAGE = 24 * MIB
# What an OCR engine's models and the interpreter cost a worker before any page.
TASK_BASE_BYTES = 400 * MIB


def memory_estimate(size_bytes: int, pages: int) -> int:
    """Bytes a prepare task asks Ray for: honest, since ``memory=`` is admission only."""
    return TASK_BASE_BYTES + 2 * size_bytes + pages * BYTES_PER_PAGE


class ChunkPreparer:
    """Turns one chunk of one source into a PreparedRequest."""

    def __init__(
        self,
        prepare: PrepareSettings,
        claude: RequestSettings,
        ocr_settings: OcrSettings,
        ocr: OcrEngine | None,
        cache: PageTextCache | None = None,
    ) -> None:
        self._prepare = prepare
        self._claude = claude
        self._min_confidence = ocr_settings.ocr_min_confidence
        self._ocr = ocr
        self._cache = cache
        engine = ocr.name if ocr is not None else "none"
        self.config = request_config(prepare, claude, self._min_confidence, engine)
        self._options = RenderOptions(
            long_edge=prepare.page_long_edge,
            image_format=prepare.image_format,
            quality=prepare.image_quality,
            max_page_pixels=prepare.max_page_pixels,
        )

    def prepare(
        self, job: JobRecord, plan: ChunkPlan, data: bytes, cache: PageTextCache | None = None
    ) -> PreparedChunk:
        """Render, read and package the chunk's pages; ``cache`` stands in for the preparer's own.
        A page drawn neither for OCR nor for Claude (its text layer goes alone) is not drawn at all."""
        with open_source(data, job.kind, max_page_pixels=self._prepare.max_page_pixels) as doc:
            texts = [text_layer(doc[p - 1]) for p in plan.pages]
            rasters = [
                rasterize(doc[t.page - 1], self._options, for_ocr=self._reads(t)) if self._drawn(t) else None
                for t in texts
            ]
        cache = cache if cache is not None else self._cache
        texts, ocr_pages = self._read_missing(job.sha256, rasters, texts, cache)
        pages = [self._finish(raster, text) for raster, text in zip(rasters, texts, strict=True)]
        request = build_request(job.id, plan.n, job.sha256, pages, config=self.config)
        return PreparedChunk(
            request=request,
            rotations={t.page: t.rotation for t in texts},
            pages_without_text=tuple(t.page for t in texts if not t.text.strip()),
            ocr_pages=tuple(ocr_pages),
            emulated=self.config.emulated,
        )

    def _reads(self, text: PageText) -> bool:
        """Will OCR read this page (so it needs the larger raster)?"""
        return text.source is TextSource.NONE and self._ocr is not None

    def _sends_image(self, text: PageText) -> bool:
        return sends_image(text, self._prepare.page_modality, self._min_confidence)

    def _drawn(self, text: PageText) -> bool:
        """Does the page need a raster: for OCR, or because its image goes to Claude?"""
        return self._reads(text) or self._sends_image(text)

    def _read_missing(
        self,
        sha256: str,
        rasters: Sequence[PageRaster | None],
        texts: list[PageText],
        cache: PageTextCache | None,
    ) -> tuple[list[PageText], list[int]]:
        """OCR the pages whose text layer is not usable (cached per page), when an engine is set."""
        missing = [i for i, t in enumerate(texts) if t.source is TextSource.NONE]
        if not missing or self._ocr is None:
            return texts, []
        engine: OcrEngine = self._ocr if cache is None else CachedOcr(self._ocr, cache, sha256)
        drawn = [raster for i in missing if (raster := rasters[i]) is not None]  # all: OCR reads
        images = [PageImage(raster.page, encode_png(raster.image)) for raster in drawn]
        for i, read in zip(missing, engine.read(images), strict=True):
            texts[i] = read
        return texts, [raster.page for raster in drawn]

    def _finish(self, raster: PageRaster | None, text: PageText) -> RenderedPage:
        """Turn the page upright and encode it for Claude; only its text when that goes alone."""
        if raster is None or not self._sends_image(text):
            return RenderedPage(page=text.page, image=None, media_type="", width=0, height=0, text=text)
        image = fit_for_claude(upright(raster.image, text.rotation))
        data, media_type = encode(image, self._prepare.image_format, self._prepare.image_quality)
        return RenderedPage(
            page=raster.page,
            image=data,
            media_type=media_type,
            width=image.width,
            height=image.height,
            text=text,
        )
