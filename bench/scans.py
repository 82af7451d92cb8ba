"""Scanned bundles for the benchmarks: the sample corpus with every page printed and scanned.

Each page is an image only (no text layer), as a scanner makes it, so preparing it is the full
render + encode work (and OCR, when an engine is on). Deterministic for a given count and seed.
"""

from __future__ import annotations

from pathlib import Path

from raybatch.samples import plan_corpus
from raybatch.samples.plan import PlannedBundle
from raybatch.samples.render import render_bundle


def write_scanned_bundles(out_dir: Path, bundles: int, seed: int = 7, max_pages: int = 0) -> list[Path]:
    """Write ``bundles`` image-only PDFs into ``out_dir``; ``max_pages`` > 0 keeps the first pages only."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for bundle in plan_corpus(bundles, seed).bundles:
        for page in bundle.pages:
            page.scanned = True
        if max_pages > 0:
            _keep_first_pages(bundle, max_pages)
        path = out_dir / bundle.file
        path.write_bytes(render_bundle(bundle, seed))
        paths.append(path)
    return paths


def _keep_first_pages(bundle: PlannedBundle, max_pages: int) -> None:
    """Cut the bundle's documents so it holds at most ``max_pages`` pages."""
    kept, room = [], max_pages
    for doc in bundle.documents:
        if room <= 0:
            break
        doc.pages = doc.pages[:room]
        room -= len(doc.pages)
        kept.append(doc)
    bundle.documents = kept
