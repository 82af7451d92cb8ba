"""Reading order of recognised boxes, including a slightly skewed scan."""

from __future__ import annotations

import math

from raybatch.ocr.layout import TextBox, group_lines, lines_text


def quad(left: float, top: float, width: float, height: float, skew_deg: float) -> list[tuple[float, float]]:
    """A box's corners turned by ``skew_deg`` about the page origin (clockwise on screen)."""
    a = math.radians(skew_deg)
    corners = [(left, top), (left + width, top), (left + width, top + height), (left, top + height)]
    return [(x * math.cos(a) - y * math.sin(a), x * math.sin(a) + y * math.cos(a)) for x, y in corners]


def page(skew: float) -> list[TextBox]:
    pieces = [
        ("Section 3", 40, 100, 90),
        ("Force majeure releases the parties from liability for the duration of the event.", 40, 130, 900),
        ("Total:", 40, 160, 60),
        ("1,250.00", 700, 160, 80),
        ("Section 4", 40, 190, 90),
    ]
    return [TextBox.from_quad(text, 0.9, quad(x, y, w, 20, skew)) for text, x, y, w in pieces]


def test_lines_come_top_to_bottom_and_left_to_right() -> None:
    expected = (
        "Section 3\nForce majeure releases the parties from liability for the duration of the event.\n"
        "Total: 1,250.00\nSection 4"
    )
    assert lines_text(group_lines(page(0.0)[::-1])) == expected


def test_a_skewed_scan_keeps_its_lines() -> None:
    for skew in (-1.5, 1.5):
        assert lines_text(group_lines(page(skew))) == lines_text(group_lines(page(0.0)))


def test_no_boxes_no_text() -> None:
    assert lines_text(group_lines([])) == ""
