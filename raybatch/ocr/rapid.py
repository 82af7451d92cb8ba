"""RapidOCR 3.x with the PP-OCR models inside its wheel (the ``rapidocr`` extra); it never downloads.

Its bundled recogniser reads Latin script (English) but has no Cyrillic: the default local engine is
``TesseractOcrEngine``, which reads both languages and finds rotation with Tesseract's own model.
Here rotation comes from the detector's line geometry and the 0/180 angle classifier.
"""

from __future__ import annotations

import importlib.metadata
import threading
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from raybatch.errors import ConfigError
from raybatch.models import PageText, ocr_origin
from raybatch.ocr.images import decode_bgr, shrink, turn_clockwise
from raybatch.ocr.layout import TextBox, group_lines, lines_text, mean_score
from raybatch.ocr.port import PageImage

# The models rapidocr 3.x ships in its wheel (rapidocr/models): PP-OCRv6 small det/rec, v2 cls.
DET_MODEL = "PP-OCRv6_det_small.onnx"
REC_MODEL = "PP-OCRv6_rec_small.onnx"
CLS_MODEL = "ch_ppocr_mobile_v2.0_cls_mobile.onnx"
# Text is found on a copy of the page this size (the detector's cost grows with pixels, and the
# corpus's 11 pt lines stay well detectable); lines are then read from the full-size page.
DETECT_LONG_EDGE = 960
_VOTING_LINES = 12
_PIECES_PER_LINE = 3
_PIECE_ASPECT = 4  # the angle classifier reads 192 x 48: longer crops would be squeezed to mush


def rapidocr_version() -> str:
    """The installed rapidocr version, or '' when it is not installed."""
    try:
        return importlib.metadata.version("rapidocr")
    except importlib.metadata.PackageNotFoundError:
        return ""


class RapidOcrEngine:
    """PP-OCRv6 on onnxruntime; loads its models once per process, on first use; picklable."""

    def __init__(self, threads: int = 0, detect_long_edge: int = DETECT_LONG_EDGE) -> None:
        self.threads = threads  # onnxruntime threads per session; 0 = all cores
        self.detect_long_edge = detect_long_edge
        self.name = f"rapidocr-{rapidocr_version()}/{REC_MODEL.removesuffix('.onnx')}"

    def read(self, pages: Sequence[PageImage]) -> list[PageText]:
        """Text, mean line score and upright rotation for each page."""
        return [self.read_one(page) for page in pages]

    def read_one(self, page: PageImage) -> PageText:
        """One page: find its rotation on a small copy, then read it upright at full size."""
        image = decode_bgr(page.image, page.page)
        rotation = self.detect_rotation(image)
        boxes = self.read_boxes(turn_clockwise(image, rotation))
        return PageText(
            page=page.page,
            text=lines_text(group_lines(boxes)),
            origin=ocr_origin(self.name),
            confidence=round(mean_score(boxes), 4),
            rotation=rotation,
        )

    def detect_rotation(self, image: np.ndarray) -> int:
        """Clockwise degrees (0/90/180/270) that make the page upright."""
        small, scale = shrink(image, self.detect_long_edge)
        with _lock():
            return detect_rotation(self._loaded(), image, small, scale)

    def read_boxes(self, upright: np.ndarray) -> list[TextBox]:
        """Every text line found on an upright page."""
        with _lock():
            out = self._loaded()(upright, use_det=True, use_cls=False, use_rec=True)
        return _text_boxes(out)

    def _loaded(self) -> Any:
        return _engine(self.threads, self.detect_long_edge)


def detect_rotation(engine: Any, image: np.ndarray, small: np.ndarray, scale: float) -> int:
    """Rotation from line geometry (lines across or along the page) and the 0/180 classifier's vote.

    A crop of a vertical line comes out of ``get_rotate_crop_image`` turned 90° counter-clockwise:
    upright when the text ran down the page (page needs 270°), upside down when it ran up (90°).
    """
    quads = _detect(engine, small)
    vertical = _mostly_vertical(quads)
    flipped = _upside_down(engine, image, quads / scale, vertical)
    if vertical:
        return 90 if flipped else 270
    return 180 if flipped else 0


def _detect(engine: Any, image: np.ndarray) -> np.ndarray:
    out = engine(image, use_det=True, use_cls=False, use_rec=False)
    boxes = getattr(out, "boxes", None)
    return np.zeros((0, 4, 2), dtype=np.float32) if boxes is None else np.asarray(boxes, np.float32)


def _sides(quads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each quad's width (first edge) and height (last edge)."""
    widths = np.linalg.norm(quads[:, 1] - quads[:, 0], axis=1)
    heights = np.linalg.norm(quads[:, 3] - quads[:, 0], axis=1)
    return widths, heights


def _mostly_vertical(quads: np.ndarray) -> bool:
    """True when elongated boxes are mostly taller than wide (lines run up or down the page)."""
    if len(quads) == 0:
        return False
    widths, heights = _sides(quads)
    area = widths * heights
    tall = heights > 2 * widths
    wide = widths > 2 * heights
    return float(area[tall].sum()) > float(area[wide].sum())


def _upside_down(engine: Any, image: np.ndarray, quads: np.ndarray, vertical: bool) -> bool:
    """The angle classifier's vote, weighted by score, on pieces of the longest lines (full size)."""
    from rapidocr.utils.process_img import get_rotate_crop_image

    if len(quads) == 0:
        return False
    widths, heights = _sides(quads)
    along, across = (heights, widths) if vertical else (widths, heights)
    lines = [i for i in np.argsort(-along) if along[i] > 2 * across[i]][:_VOTING_LINES]
    votes = {"0": 0.0, "180": 0.0}
    for i in lines:
        for piece in _pieces(get_rotate_crop_image(image, quads[i].astype(np.float32))):
            out = engine(piece, use_det=False, use_cls=True, use_rec=False)
            for label, score in getattr(out, "cls_res", None) or []:
                votes[label] = votes.get(label, 0.0) + float(score)
    return votes["180"] > votes["0"]


def _pieces(crop: np.ndarray) -> list[np.ndarray]:
    """A line crop cut into a few pieces of the classifier's shape."""
    height, width = crop.shape[:2]
    step = max(1, _PIECE_ASPECT * height)
    count = max(1, min(_PIECES_PER_LINE, width // step))
    return [crop[:, k * step : (k + 1) * step] for k in range(count)]


def _text_boxes(out: Any) -> list[TextBox]:
    boxes, texts = getattr(out, "boxes", None), getattr(out, "txts", None)
    scores = getattr(out, "scores", None)
    if boxes is None or texts is None or scores is None:
        return []
    return [
        TextBox.from_quad(str(text), float(score), quad)
        for quad, text, score in zip(np.asarray(boxes), texts, scores, strict=True)
    ]


def model_dir() -> Path:
    """Where rapidocr keeps the models of its wheel."""
    try:
        import rapidocr
    except ImportError as exc:
        raise ConfigError("OCR engine 'rapidocr' is not installed: pip install 'raybatch[rapidocr]'") from exc
    return Path(rapidocr.__file__).resolve().parent / "models"


@cache
def _lock() -> threading.Lock:
    # RapidOCR keeps per-call switches on the instance, and one page at a time uses the cores well.
    return threading.Lock()


@cache
def _engine(threads: int, detect_long_edge: int = DETECT_LONG_EDGE) -> Any:
    """The loaded RapidOCR, once per process and setting, from the wheel's own model files."""
    from rapidocr import RapidOCR

    root = model_dir()
    paths = {key: root / name for key, name in (("Det", DET_MODEL), ("Rec", REC_MODEL), ("Cls", CLS_MODEL))}
    missing = [p.name for p in paths.values() if not p.is_file()]
    if missing:
        raise ConfigError(
            f"rapidocr {rapidocr_version()} lacks its bundled models {missing} in {root}; "
            "install a rapidocr 3.x wheel that ships them (no model is ever downloaded)"
        )
    params: dict[str, Any] = {
        "Global.log_level": "error",
        "Det.limit_type": "max",
        "Det.limit_side_len": detect_long_edge,
    }
    for key, path in paths.items():
        params[f"{key}.model_path"] = str(path)
    if threads:
        params["EngineConfig.onnxruntime.intra_op_num_threads"] = threads
        params["EngineConfig.onnxruntime.inter_op_num_threads"] = 1
    return RapidOCR(params=params)
