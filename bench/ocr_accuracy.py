"""OCR accuracy and speed on the sample corpus's scanned and rotated pages (a script, not a test).

For every local engine installed: character error rate against the text the generator printed
(by language), pages/s in one process, rotation accuracy, and how many footers the Claude
emulator's rules read as printed: page k of n (what documents are split on) and the document
number. Prints a table, then one JSON object on the last line.

    python bench/ocr_accuracy.py [--bundles 6] [--seed 7] [--engines rapidocr,tesseract] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pymupdf

from raybatch.claude.emulator.rules import Footer, read_page
from raybatch.models import PageText
from raybatch.ocr.port import OcrEngine, PageImage
from raybatch.samples import plan_corpus, write_samples
from raybatch.samples.plan import PlannedPage
from raybatch.steps.render import RenderOptions, encode_png, rasterize


@dataclass(frozen=True)
class Sample:
    """One page to read and what is printed on it."""

    image: PageImage
    kind: str  # "scanned" or "digital"
    language: str
    rotation: int
    text: str
    footer: str | None


@dataclass
class Score:
    """One engine's result on one page."""

    sample: Sample
    read: PageText
    seconds: float

    @property
    def errors(self) -> int:
        """Edit distance between what was printed and what was read (whitespace collapsed)."""
        return levenshtein(normalise(self.sample.text), normalise(self.read.text))

    def footers(self) -> tuple[Footer | None, Footer | None]:
        """The footer the Claude emulator's rules find in the print, and in what the engine read."""
        page = self.sample.image.page
        return read_page(page, self.sample.text).footer, read_page(page, self.read.text).footer

    @property
    def pages_ok(self) -> bool:
        """The rules read the same 'page k of n' as printed (or no footer where none is printed)."""
        printed, read = self.footers()
        return (printed.k, printed.n) == (read.k, read.n) if printed and read else printed == read

    @property
    def number_ok(self) -> bool:
        """The rules read the same document number in the footer as printed."""
        printed, read = self.footers()
        return (printed.number if printed else None) == (read.number if read else None)


def levenshtein(a: str, b: str) -> int:
    """Edit distance, bit-parallel (Myers/Hyyrö) on Python ints: fast for page-sized strings."""
    if not a or not b:
        return len(a) + len(b)
    full, top = (1 << len(a)) - 1, 1 << (len(a) - 1)
    masks: dict[str, int] = {}
    for i, ch in enumerate(a):
        masks[ch] = masks.get(ch, 0) | (1 << i)
    pv, mv, score = full, 0, len(a)
    for ch in b:
        eq = masks.get(ch, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = (mv | ~(xh | pv)) & full
        mh = pv & xh
        score += 1 if ph & top else -1 if mh & top else 0
        ph = ((ph << 1) | 1) & full
        mh = (mh << 1) & full
        pv = (mh | ~(xv | ph)) & full
        mv = ph & xv
    return score


def normalise(text: str) -> str:
    """Whitespace collapsed to single spaces."""
    return re.sub(r"\s+", " ", text).strip()


def corpus_samples(folder: Path, bundles: int, seed: int) -> list[Sample]:
    """Scanned or rotated pages with text, drawn as the prepare stage draws them (not yet upright)."""
    write_samples(folder, bundles, seed)
    samples = []
    for bundle in plan_corpus(bundles, seed).bundles:
        languages = [doc.spec.language for doc in bundle.documents for _ in doc.pages]
        with pymupdf.open(folder / bundle.file) as pdf:
            for n, planned in enumerate(bundle.pages):
                if planned.blank or not (planned.scanned or planned.rotation):
                    continue
                raster = rasterize(pdf[n], RenderOptions())
                samples.append(_sample(n + 1, planned, encode_png(raster.image), languages[n]))
    return samples


def _sample(page: int, planned: PlannedPage, png: bytes, language: str) -> Sample:
    return Sample(
        image=PageImage(page=page, image=png),
        kind="scanned" if planned.scanned else "digital",
        language=language,
        rotation=planned.rotation,
        text=planned.text,
        footer=planned.footer,
    )


def measure(engine: OcrEngine, samples: list[Sample]) -> list[Score]:
    """Read every sample one page at a time, timing each."""
    scores = []
    for sample in samples:
        start = time.perf_counter()
        read = engine.read([sample.image])[0]
        scores.append(Score(sample, read, time.perf_counter() - start))
    return scores


def summary(name: str, scores: list[Score]) -> dict[str, object]:
    """CER overall and by language and kind, pages/s, rotation and footer accuracy."""

    def cer(subset: list[Score]) -> float | None:
        chars = sum(len(normalise(s.sample.text)) for s in subset)
        return round(sum(s.errors for s in subset) / chars, 4) if chars else None

    rotated = [s for s in scores if s.sample.rotation]
    return {
        "engine": name,
        "pages": len(scores),
        "cer": cer(scores),
        "cer_en": cer([s for s in scores if s.sample.language == "en"]),
        "cer_ru": cer([s for s in scores if s.sample.language == "ru"]),
        "cer_scanned": cer([s for s in scores if s.sample.kind == "scanned"]),
        "pages_per_s": round(len(scores) / sum(s.seconds for s in scores), 3) if scores else None,
        "rotation_accuracy": _share(scores, lambda s: s.read.rotation == s.sample.rotation),
        "rotated_pages": len(rotated),
        "rotated_accuracy": _share(rotated, lambda s: s.read.rotation == s.sample.rotation),
        "footer_pages_ok": _share(scores, lambda s: s.pages_ok),
        "footer_numbers_ok": _share(scores, lambda s: s.number_ok),
        "mean_confidence": _mean([s.read.confidence for s in scores]),
    }


def _share(scores: list[Score], ok: object) -> float | None:
    return round(sum(1 for s in scores if ok(s)) / len(scores), 4) if scores else None  # type: ignore[operator]


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def engines(names: list[str], threads: int) -> dict[str, OcrEngine]:
    """The requested local engines that are installed."""
    from raybatch.ocr import installed
    from raybatch.ocr.rapid import RapidOcrEngine
    from raybatch.ocr.tesseract import TesseractOcrEngine, tesseract_available
    from raybatch.settings import OcrEngineName

    found: dict[str, OcrEngine] = {}
    for name in names:
        if name == "rapidocr" and installed(OcrEngineName.RAPIDOCR):
            found[name] = RapidOcrEngine(threads=threads)
        elif name == "tesseract" and tesseract_available("eng+rus"):
            found[name] = TesseractOcrEngine("eng+rus", threads=threads)
        else:
            print(f"skipping {name}: not installed", file=sys.stderr)
    return found


def print_table(rows: list[dict[str, object]]) -> None:
    """One line per engine."""
    columns = [
        "engine",
        "pages",
        "cer",
        "cer_en",
        "cer_ru",
        "pages_per_s",
        "rotation_accuracy",
        "rotated_accuracy",
        "footer_pages_ok",
        "footer_numbers_ok",
    ]
    print(" | ".join(f"{c:>10}" for c in columns))
    for row in rows:
        print(" | ".join(f"{row[c]!s:>{max(10, len(c))}}" for c in columns))


def main(argv: list[str] | None = None) -> None:
    """Build the corpus, read its scanned and rotated pages with each engine, report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=int, default=6)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--engines", default="rapidocr,tesseract")
    parser.add_argument("--limit", type=int, default=0, help="read only the first N pages")
    parser.add_argument("--threads", type=int, default=0, help="onnxruntime threads; 0 = all cores")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ocr-bench-") as folder:
        samples = corpus_samples(Path(folder), args.bundles, args.seed)
    samples = samples[: args.limit] if args.limit else samples
    rows = []
    for name, engine in engines(args.engines.split(","), args.threads).items():
        rows.append({**summary(name, measure(engine, samples)), "version": engine.name})
    print_table(rows)
    print(json.dumps({"bundles": args.bundles, "seed": args.seed, "pages": len(samples), "engines": rows}))


if __name__ == "__main__":
    main()
