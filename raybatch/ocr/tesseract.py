"""Tesseract, where Debian's packages put it (tesseract-ocr, tesseract-ocr-rus): reads Cyrillic.

The PyPI wheels hold no Russian model (rapidocr's bundled PP-OCRv6 recogniser has no Cyrillic
characters), so this engine is the local choice for the Russian part of the corpus when present.
Rotation comes from RapidOCR's detector and angle classifier; Tesseract reads the upright page.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
from collections.abc import Sequence
from functools import cache

from raybatch.errors import ConfigError, InvalidSource
from raybatch.models import PageText
from raybatch.ocr.images import decode_bgr, encode_png, turn_clockwise
from raybatch.ocr.port import PageImage
from raybatch.ocr.rapid import RapidOcrEngine

DEFAULT_LANGUAGES = "eng+rus"
_TIMEOUT_S = 120.0


@cache
def tesseract_version(binary: str = "tesseract") -> str:
    """``5.3.0`` for the tesseract on PATH, '' when there is none."""
    path = shutil.which(binary)
    if path is None:
        return ""
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False)
    first = (out.stdout or out.stderr).split("\n", 1)[0].split()
    return first[1] if len(first) > 1 else "unknown"


@cache
def tesseract_languages(binary: str = "tesseract") -> frozenset[str]:
    """The language models installed for the tesseract on PATH."""
    path = shutil.which(binary)
    if path is None:
        return frozenset()
    out = subprocess.run([path, "--list-langs"], capture_output=True, text=True, timeout=30, check=False)
    return frozenset(line.strip() for line in out.stdout.splitlines()[1:] if line.strip())


def tesseract_available(languages: str = DEFAULT_LANGUAGES) -> bool:
    """True when tesseract is on PATH with every model ``languages`` names (``eng+rus``)."""
    return bool(tesseract_version()) and set(languages.split("+")) <= tesseract_languages()


class TesseractOcrEngine:
    """Tesseract 5 through its command line (one process per page, one thread each); picklable."""

    def __init__(self, languages: str = DEFAULT_LANGUAGES, threads: int = 0) -> None:
        if not tesseract_available(languages):
            raise ConfigError(
                f"tesseract with languages {languages!r} is not installed "
                "(Debian: apt-get install tesseract-ocr tesseract-ocr-rus)"
            )
        self.languages = languages
        self.rotation = RapidOcrEngine(threads=threads)
        self.name = f"tesseract-{tesseract_version()}/{languages}"

    def read(self, pages: Sequence[PageImage]) -> list[PageText]:
        """Text, mean word confidence and upright rotation for each page."""
        return [self.read_one(page) for page in pages]

    def read_one(self, page: PageImage) -> PageText:
        """One page: rotation from RapidOCR on a small copy, then Tesseract on the upright page."""
        image = decode_bgr(page.image, page.page)
        rotation = self.rotation.detect_rotation(image)
        tsv = self._run(encode_png(turn_clockwise(image, rotation)), page.page)
        text, confidence = parse_tsv(tsv)
        return PageText(
            page=page.page, text=text, origin=f"ocr:{self.name}", confidence=confidence, rotation=rotation
        )

    def _run(self, png: bytes, page: int) -> str:
        cmd = ["tesseract", "stdin", "stdout", "-l", self.languages, "--psm", "3", "tsv"]
        # One OpenMP thread: parallelism comes from pages and tasks, not from inside one page.
        env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
        try:
            out = subprocess.run(cmd, input=png, capture_output=True, timeout=_TIMEOUT_S, env=env, check=True)
        except subprocess.TimeoutExpired as exc:
            raise InvalidSource(f"page {page}: tesseract ran past {_TIMEOUT_S:.0f} s") from exc
        except subprocess.CalledProcessError as exc:
            raise InvalidSource(f"page {page}: tesseract failed with exit code {exc.returncode}") from exc
        return out.stdout.decode("utf-8", errors="replace")


def parse_tsv(tsv: str) -> tuple[str, float]:
    """Tesseract's TSV → (text, one line per detected line; mean word confidence in 0..1)."""
    lines: dict[tuple[str, str, str, str], list[str]] = {}
    confidences: list[float] = []
    for row in csv.DictReader(io.StringIO(tsv), delimiter="\t", quoting=csv.QUOTE_NONE):
        word = (row.get("text") or "").strip()
        if row.get("level") != "5" or not word:
            continue
        key = (row["page_num"], row["block_num"], row["par_num"], row["line_num"])
        lines.setdefault(key, []).append(word)
        confidences.append(max(0.0, float(row.get("conf") or 0.0)) / 100.0)
    text = "\n".join(" ".join(words) for words in lines.values())
    confidence = round(sum(confidences) / len(confidences), 4) if confidences else 0.0
    return text, confidence
