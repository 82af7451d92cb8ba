"""Reading order: text boxes found on an upright page → lines of text, top to bottom.

Scans are a little skewed, so boxes are compared in the page's own frame: their centres are
turned back by the median slope of the boxes before lines are formed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TextBox:
    """A piece of recognised text: its centre, its height across the line, and its slope."""

    text: str
    score: float
    x: float
    y: float
    height: float
    angle: float = 0.0  # radians, of the line the text runs along (y grows downwards)

    @classmethod
    def from_quad(cls, text: str, score: float, quad: Sequence[Sequence[float]]) -> TextBox:
        """From four corners in reading order: top-left, top-right, bottom-right, bottom-left."""
        (x0, y0), (x1, y1), (x2, y2), (x3, y3) = (tuple(map(float, p))[:2] for p in quad)
        return cls(
            text=text,
            score=score,
            x=(x0 + x1 + x2 + x3) / 4,
            y=(y0 + y1 + y2 + y3) / 4,
            height=max(1.0, math.hypot(x3 - x0, y3 - y0)),
            angle=math.atan2(y1 - y0, x1 - x0),
        )


def group_lines(boxes: Sequence[TextBox]) -> list[list[TextBox]]:
    """Boxes grouped into lines, top to bottom, each line left to right."""
    if not boxes:
        return []
    skew = statistics.median(b.angle for b in boxes)
    cos, sin = math.cos(skew), math.sin(skew)

    def across(b: TextBox) -> float:  # position down the page, in the deskewed frame
        return -sin * b.x + cos * b.y

    def along(b: TextBox) -> float:
        return cos * b.x + sin * b.y

    lines: list[list[TextBox]] = []
    for box in sorted(boxes, key=across):
        line = lines[-1] if lines else None
        if line is not None and abs(across(box) - across(line[-1])) < 0.5 * min(box.height, line[-1].height):
            line.append(box)
        else:
            lines.append([box])
    return [sorted(line, key=along) for line in lines]


def lines_text(lines: Sequence[Sequence[TextBox]]) -> str:
    """The lines as text: pieces joined by spaces, lines by newlines."""
    return "\n".join(" ".join(b.text.strip() for b in line if b.text.strip()) for line in lines).strip()


def mean_score(boxes: Sequence[TextBox]) -> float:
    """Mean recognition score of the boxes; 0.0 when there are none."""
    return sum(b.score for b in boxes) / len(boxes) if boxes else 0.0
