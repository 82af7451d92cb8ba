"""Reading order: text boxes found on an upright page → lines of text, top to bottom."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TextBox:
    """A piece of recognised text and its axis-aligned box on the upright page."""

    text: str
    score: float
    left: float
    top: float
    right: float
    bottom: float

    @property
    def middle(self) -> float:
        """Vertical centre."""
        return (self.top + self.bottom) / 2


def group_lines(boxes: Sequence[TextBox]) -> list[list[TextBox]]:
    """Boxes grouped into lines (a box joins a line its vertical centre falls in), left to right."""
    lines: list[list[TextBox]] = []
    for box in sorted(boxes, key=lambda b: (b.top, b.left)):
        line = lines[-1] if lines else None
        if line is not None and _same_line(line, box):
            line.append(box)
        else:
            lines.append([box])
    return [sorted(line, key=lambda b: b.left) for line in lines]


def _same_line(line: Sequence[TextBox], box: TextBox) -> bool:
    top = min(b.top for b in line)
    bottom = max(b.bottom for b in line)
    return top <= box.middle <= bottom and box.top < bottom


def lines_text(lines: Sequence[Sequence[TextBox]]) -> str:
    """The lines as text: words joined by spaces, lines by newlines."""
    return "\n".join(" ".join(b.text.strip() for b in line if b.text.strip()) for line in lines).strip()


def mean_score(boxes: Sequence[TextBox]) -> float:
    """Mean recognition score of the boxes; 0.0 when there are none."""
    return sum(b.score for b in boxes) / len(boxes) if boxes else 0.0
