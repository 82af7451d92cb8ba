"""Cloud Vision's wire shapes both sides need: orientation from vertex order, and a response body.

Vision keeps a box's vertices in reading order (0 = the text's top-left, 1 = its top-right) even
when the page is turned, so the direction 0 → 1 is the direction the text runs on the image.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

Point = tuple[float, float]
_LINE_HEIGHT = 24
_CHAR_WIDTH = 10
_MARGIN = 20

# HTTP status → google.rpc status name, as Google's JSON error bodies carry them.
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def rotation_from_direction(dx: float, dy: float) -> int:
    """Clockwise degrees that make text upright, given the direction it runs in image coordinates."""
    angle = math.degrees(math.atan2(dy, dx))  # y grows downwards: 90 = running down the image
    running = round(angle / 90) % 4  # 0 right, 1 down, 2 left, 3 up
    return (0, 270, 180, 90)[running]


def rotation_from_boxes(boxes: Iterable[tuple[Sequence[Point], float]]) -> int:
    """The rotation most of the text agrees on, each box weighted (e.g. by its characters)."""
    votes = dict.fromkeys((0, 90, 180, 270), 0.0)
    for vertices, weight in boxes:
        if len(vertices) < 2:
            continue
        (x0, y0), (x1, y1) = vertices[0], vertices[1]
        if (x0, y0) != (x1, y1):
            votes[rotation_from_direction(x1 - x0, y1 - y0)] += weight
    best = max(votes, key=lambda r: votes[r])
    return best if votes[best] > 0 else 0


def error_body(http_status: int, message: str) -> dict[str, Any]:
    """Google's JSON error body for an HTTP error."""
    status = STATUS_NAMES.get(http_status, "UNKNOWN")
    return {"error": {"code": http_status, "message": message, "status": status}}


def annotate_response(text: str, rotation: int, width: int, height: int, confidence: float) -> dict[str, Any]:
    """One AnnotateImageResponse (REST JSON) for text read off a ``width`` × ``height`` image.

    The layout is synthetic (a line per text line, words at fixed pitch) but its vertex order
    follows the page's rotation, as Vision's does.
    """
    full = text.strip() + "\n" if text.strip() else ""
    if not full:
        return {}  # Vision answers an image without text with an empty response
    upright = (width, height) if rotation in (0, 180) else (height, width)
    place = _placer(rotation, *upright)
    blocks: list[dict[str, Any]] = []
    words: list[tuple[str, dict[str, Any]]] = []
    for n, line in enumerate(text.splitlines()):
        line_words = [_word(w, x, n, confidence, place) for w, x in _word_offsets(line)]
        if not line_words:
            continue
        words.extend(zip(line.split(), line_words, strict=True))
        top = _MARGIN + n * _LINE_HEIGHT
        box = _box(place, _MARGIN, top, len(line) * _CHAR_WIDTH, _LINE_HEIGHT)
        paragraph = {"boundingBox": box, "words": line_words, "confidence": confidence}
        blocks.append(
            {"boundingBox": box, "paragraphs": [paragraph], "blockType": "TEXT", "confidence": confidence}
        )
    page = {"width": width, "height": height, "blocks": blocks, "confidence": confidence}
    whole = _box(place, 0, 0, upright[0], upright[1])
    annotations = [{"description": full, "boundingPoly": whole}]
    annotations += [{"description": w, "boundingPoly": word["boundingBox"]} for w, word in words]
    return {"textAnnotations": annotations, "fullTextAnnotation": {"pages": [page], "text": full}}


def _word_offsets(line: str) -> list[tuple[str, int]]:
    out, column = [], 0
    for token in line.split(" "):
        if token:
            out.append((token, column))
        column += len(token) + 1
    return out


def _word(word: str, column: int, row: int, confidence: float, place: Any) -> dict[str, Any]:
    left, top = _MARGIN + column * _CHAR_WIDTH, _MARGIN + row * _LINE_HEIGHT
    symbols: list[dict[str, Any]] = [{"text": ch, "confidence": confidence} for ch in word]
    symbols[-1]["property"] = {"detectedBreak": {"type": "SPACE"}}
    box = _box(place, left, top, len(word) * _CHAR_WIDTH, _LINE_HEIGHT)
    return {"boundingBox": box, "symbols": symbols, "confidence": confidence}


def _box(place: Any, left: float, top: float, width: float, height: float) -> dict[str, Any]:
    corners = ((left, top), (left + width, top), (left + width, top + height), (left, top + height))
    return {"vertices": [place(x, y) for x, y in corners]}


def _placer(rotation: int, width: int, height: int) -> Any:
    """Maps a point on the upright page to the image, which is the upright page turned back."""

    def place(x: float, y: float) -> dict[str, int]:
        if rotation == 90:  # image = upright turned 90° counter-clockwise
            px, py = y, width - x
        elif rotation == 180:
            px, py = width - x, height - y
        elif rotation == 270:  # image = upright turned 90° clockwise
            px, py = height - y, x
        else:
            px, py = x, y
        return {"x": round(px), "y": round(py)}

    return place
