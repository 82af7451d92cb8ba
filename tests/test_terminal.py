"""What raybatch shows: the progress bars in a notebook, the list of documents."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console, RenderableType

from raybatch.loops.driver import Progress
from raybatch.models import DocumentRecord
from raybatch.terminal import ProgressBars, document_list_table


def text_of(renderable: RenderableType) -> str:
    plain = Console(width=160, record=True, file=io.StringIO())
    plain.print(renderable)
    return plain.export_text()


class Output:
    """A notebook output: what it shows now."""

    def __init__(self, shown: Any) -> None:
        self.shown = [shown]

    def update(self, shown: Any) -> None:
        self.shown.append(shown)


def snapshot(done: int) -> Progress:
    by_status = {"completed": done, "pending": 2 - done}
    return Progress(2, by_status, 10, 5 * done, 3, 0, 0.0, False, 1.0)


def test_in_a_notebook_the_bars_are_one_output_redrawn_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    outputs: list[Output] = []
    monkeypatch.setattr(
        "IPython.display.display", lambda shown, **_: outputs.append(Output(shown)) or outputs[-1]
    )

    with ProgressBars(shown_on=Console(force_jupyter=True)) as bars:
        bars.update(snapshot(1))
        bars.update(snapshot(2))

    [output] = outputs
    last = text_of(output.shown[-1])
    assert len(output.shown) == 3
    assert "jobs" in last and "2/2" in last and "10/10" in last and "docs 3" in last


def test_in_a_notebook_quiet_bars_show_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("IPython.display.display", lambda *_, **__: pytest.fail("displayed"))

    with ProgressBars(enabled=False, shown_on=Console(force_jupyter=True)) as bars:
        bars.update(snapshot(2))


def test_the_document_list_has_a_row_per_document_and_keeps_brackets() -> None:
    docs = [
        DocumentRecord(1, 0, 1, 2, "invoice", values={"title": "[DRAFT] Invoice 7", "amount": 12.5}),
        DocumentRecord(1, 1, 3, 3, "letter", values={"counterparty": "ACME"}),
    ]

    text = text_of(document_list_table({"bundle_000.pdf": docs}))

    rows = [line for line in text.splitlines() if "bundle_000.pdf" in line]
    assert len(rows) == 2
    assert "[DRAFT] Invoice 7" in rows[0] and "1-2" in rows[0] and "12.5" in rows[0]
    assert "ACME" in rows[1] and "letter" in rows[1]


def test_the_progress_line_and_status_say_how_many_documents_wait_for_review(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dataclasses import replace

    from raybatch.terminal import status_table

    outputs: list[Output] = []
    monkeypatch.setattr(
        "IPython.display.display", lambda shown, **_: outputs.append(Output(shown)) or outputs[-1]
    )
    with ProgressBars(shown_on=Console(force_jupyter=True)) as bars:
        bars.update(replace(snapshot(2), review_pending=4))
    assert "review 4" in text_of(outputs[0].shown[-1])
    summary: dict[str, Any] = {
        "by_status": {"completed": 2}, "jobs": 2, "pages": 10, "documents": 3, "active_batches": 0,
        "input_tokens": 1, "output_tokens": 1, "requests": 1, "requests_reused": 0, "requests_emulated": 1,
        "estimated_cost_usd": 0.0, "paused": False, "review": {"pending": 4, "accepted": 1, "corrected": 2},
    }  # fmt: skip
    [row] = [line for line in text_of(status_table(summary)).splitlines() if "review (" in line]
    assert row.split("│")[1:3] == [" review (pending, accepted, corrected) ", " 4 (1, 2) "]
