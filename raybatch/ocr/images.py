"""Pixel helpers the engines share: decode a page image, shrink it, turn it upright."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, UnidentifiedImageError

from raybatch.errors import InvalidSource

ROTATIONS = (0, 90, 180, 270)


def decode_bgr(data: bytes, page: int) -> np.ndarray:
    """An encoded image as a BGR array (the layout OpenCV-based engines expect)."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            rgb = np.asarray(img.convert("RGB"))
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise InvalidSource(f"page {page}: image cannot be decoded ({type(exc).__name__})") from exc
    return np.ascontiguousarray(rgb[:, :, ::-1])


def shrink(image: np.ndarray, long_edge: int) -> tuple[np.ndarray, float]:
    """The image with its long edge at most ``long_edge``, and the scale applied (≤ 1)."""
    height, width = image.shape[:2]
    scale = min(1.0, long_edge / max(height, width))
    if scale >= 1.0:
        return image, 1.0
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    pil = Image.fromarray(image).resize(size, Image.Resampling.LANCZOS)
    return np.asarray(pil), scale


def turn_clockwise(image: np.ndarray, degrees: int) -> np.ndarray:
    """The image turned clockwise by 0, 90, 180 or 270 degrees."""
    if degrees not in ROTATIONS:
        raise ValueError(f"rotation must be one of {ROTATIONS}, not {degrees}")
    # np.rot90 turns counter-clockwise for positive k.
    return np.ascontiguousarray(np.rot90(image, k=-(degrees // 90)))


def encode_png(image: np.ndarray) -> bytes:
    """A BGR (or grey) array as PNG bytes."""
    pixels = image[:, :, ::-1] if image.ndim == 3 else image
    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(out, format="PNG")
    return out.getvalue()
