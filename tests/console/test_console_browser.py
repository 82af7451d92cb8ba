"""The console in a real browser (Chromium from Debian packages): the pages load with no error,
a document is reviewed with the keyboard and the change shows (on the fake ledger and on the real
one), a run's progress moves while the page polls; screenshots of the main pages are saved
(RAYBATCH_SCREENSHOTS names a folder to keep them in, else the test's tmp folder)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import CHROMIUM, chromium, served
from console_builders import ConsoleData
from ledger_builders import build_ledger_data
from needs import needs
from playwright.sync_api import expect

from raybatch.console.review_port import DocumentKey
from raybatch.models import JobStatus

pytestmark = needs(CHROMIUM.exists(), f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    with chromium(tmp_path / "profile") as context:
        yield context


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("RAYBATCH_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _page(browser: Any) -> tuple[Any, list[str]]:
    page = browser.new_page()
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    return page, problems


def test_the_main_pages_load_without_errors(data: ConsoleData, browser: Any, shots: Path) -> None:
    with served(data.app()) as base:
        page, problems = _page(browser)
        for name, path, ready in [
            ("runs", "/", "#summary"),
            ("jobs", "/jobs", "#jobs"),
            ("job", f"/jobs/{data.done}", "#strip"),
            ("documents", "/documents", "#documents"),
            ("groups", "/groups", "#groups"),
            ("review", "/review", "#review"),
        ]:
            page.goto(base + path)
            page.wait_for_selector(ready)
            page.wait_for_load_state("networkidle")
            page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
        page.goto(f"{base}/jobs/{data.done}")
        page.wait_for_load_state("networkidle")
        drawn = page.eval_on_selector_all(
            "#strip img", "imgs => imgs.map(i => i.complete && i.naturalWidth > 0)"
        )
        assert drawn == [True] * 6
        assert problems == []


def test_a_document_is_reviewed_with_the_keyboard(data: ConsoleData, browser: Any, shots: Path) -> None:
    with served(data.app()) as base:
        page, problems = _page(browser)
        page.goto(base + "/review")
        heading = page.locator("h1")
        assert "document 0" in heading.inner_text()
        page.keyboard.press("j")
        page.wait_for_url("**/review?job=*&index=1")
        page.keyboard.press("k")
        page.wait_for_url("**/review?job=*&index=0")
        page.keyboard.press("c")
        assert page.evaluate("document.activeElement.closest('form').id") == "class"
        page.select_option("#class select", "letter")
        page.keyboard.press("Enter")
        page.wait_for_selector("#flash")
        page.wait_for_load_state()
        assert "document 0 is now letter" in page.locator("#flash").inner_text()
        assert "document 1" in heading.inner_text()
        assert data.state.get_document(data.done, 0).doc_type == "letter"
        page.keyboard.press("ArrowRight")  # pages 3-5: from page 4 to page 5
        assert page.locator("#pages figure.chosen").get_attribute("data-page") == "5"
        page.screenshot(path=str(shots / "review-split.png"), full_page=True)
        page.keyboard.press("s")
        page.wait_for_selector("#queue-empty")
        assert "split before page 5" in page.locator("#flash").inner_text()
        pages = [(d.first_page, d.last_page) for d in data.state.list_documents(data.done)]
        assert pages == [(1, 2), (3, 4), (5, 5), (6, 6)]
        assert [c.kind.value for c in data.review.corrections] == ["set_class", "split"]
        assert problems == []


def test_a_running_job_progress_moves_while_the_page_polls(data: ConsoleData, browser: Any) -> None:
    with served(data.app(poll_ms=150)) as base:
        page, problems = _page(browser)
        page.goto(base + "/jobs")
        row = page.locator(f'tr[data-job-id="{data.running}"]')
        assert row.locator('[data-field="percent"]').inner_text() == "0%"
        data.state.set_progress({data.running: 0.5})
        expect(row.locator('[data-field="percent"]')).to_have_text("50%")
        data.state.transition(data.running, [JobStatus.PREPARING], JobStatus.PREPARED)
        expect(row.locator('[data-field="status"]')).to_have_text("prepared")
        page.goto(base + "/")
        data.state.transition(data.running, [JobStatus.PREPARED], JobStatus.COMPLETED, progress=1.0)
        expect(page.locator('[data-figure="ended"]')).to_have_text("3")
        assert problems == []


def test_accept_edit_and_a_refused_merge_by_keyboard(data: ConsoleData, browser: Any) -> None:
    data.review.waiting.add(DocumentKey(data.done, 2))
    with served(data.app()) as base:
        page, problems = _page(browser)
        page.goto(base + "/review")
        page.keyboard.press("a")
        expect(page.locator("#flash")).to_have_text("accepted document 0")
        page.wait_for_load_state()  # the keys are bound once the page's script ran
        page.keyboard.press("e")
        assert page.evaluate("document.activeElement.closest('form').id") == "field"
        page.select_option("#field select", "counterparty")
        page.focus("#field select")
        page.keyboard.press("Tab")  # on to the value
        page.keyboard.type("Acme Corporation")
        page.keyboard.press("Enter")
        expect(page.locator("#flash")).to_have_text("counterparty of document 1 set")
        page.wait_for_load_state()
        assert data.state.get_document(data.done, 1).counterparty == "Acme Corporation"
        page.keyboard.press("m")
        expect(page.locator("#flash")).to_contain_text("not done: document 2 is the job's last")
        assert [c.kind.value for c in data.review.corrections] == ["accept", "set_field"]
        assert [c.reviewer.startswith("local:") for c in data.review.corrections] == [True, True]
        assert problems == []


def test_the_real_ledger_is_reviewed_by_keyboard(tmp_path: Path, browser: Any) -> None:
    ledger = build_ledger_data(tmp_path / "ledger")
    with served(ledger.app()) as base:
        page, problems = _page(browser)
        page.goto(base + "/review")
        page.keyboard.press("a")
        expect(page.locator("#flash")).to_have_text("accepted document 0")
        page.wait_for_load_state()
        page.keyboard.press("j")  # past document 1 to document 2, pages 3-17
        page.wait_for_url("**/review?job=*&index=2")
        page.wait_for_load_state()
        page.keyboard.press("s")  # before the chosen page, the second: 4
        expect(page.locator("#flash")).to_have_text("document 2 split before page 4")
        docs = ledger.state.list_documents(ledger.job)
        assert (docs[0].review, docs[0].version) == ("accepted", 2)
        assert [(d.first_page, d.last_page, d.version) for d in docs[2:4]] == [(3, 3, 2), (4, 17, 2)]
        kinds = [(c.kind, c.reviewer.startswith("local:")) for c in ledger.state.list_corrections(ledger.job)]
        assert kinds == [("accept", True), ("split", True)]
        assert problems == []
    ledger.state.close()
