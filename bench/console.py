"""The console's benchmark (a script, not a test): a job of 1,000 pages and a database of 100,000 jobs.

    python bench/console.py            # 100,000 jobs, a 1,000-page job
    python bench/console.py --jobs 1000000 --pages 1000

The console is served by uvicorn on loopback over a SQLite state DB and a local store; each page
is fetched ``--repeat`` times (the median is kept):
  *_first_byte_ms   request sent → first byte of the answer (the server's work on the page)
  *_page_ms         request sent → the whole HTML read, plus its CSS and JS: the page is usable
  job_first_screen_ms   the 1,000-page job's HTML, CSS, JS and its first 24 thumbnails drawn cold
  browser_*_ms      the same pages in Chromium (when /usr/bin/chromium exists): navigation start →
                    first byte, and → DOMContentLoaded (the page drawn and its script running)
Pages: runs (the overview's aggregates over every job), jobs (the newest 50), jobs_deep (a keyset
page far down the list), job (the 1,000-page job). Human-readable lines first, then one JSON object.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pymupdf
import uvicorn

from raybatch.console.app import Console, build_app
from raybatch.console.auth import Logins
from raybatch.cost import prices_for
from raybatch.ids import OutputKeys
from raybatch.models import DocumentRecord, JobStatus
from raybatch.objects import LocalObjectStore
from raybatch.settings import StateSettings, StoreSettings
from raybatch.state import open_state

CHROMIUM = Path("/usr/bin/chromium")
PAGES_PER_DOCUMENT = 8
FIRST_SCREEN = 24


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--pages", type=int, default=1000, help="pages of the big job")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-browser", action="store_true", help="skip the figures measured in Chromium")
    return parser.parse_args(argv)


def synthetic_jobs(path: Path, count: int) -> str:
    """A state DB of ``count`` jobs in every status (completed mostly), by direct inserts."""
    url = f"sqlite:///{path}"
    open_state(StateSettings(database_url=url)).close()
    now = datetime.now(UTC).isoformat()
    statuses = [s.value for s in JobStatus]
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO jobs (sha256, dedupe_key, source_uri, source_name, kind, size_bytes, mode, status,"
            " pages, progress, attempts, lease_token, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, 'pdf', 1000, 'batch', ?, 4, ?, 0, 0, ?, ?)",
            (
                (
                    f"{n:064x}",
                    f"{n:064x}",
                    f"file:///{n}.pdf",
                    f"{n}.pdf",
                    statuses[n % 7 and 6],
                    1.0,
                    now,
                    now,
                )
                for n in range(count)
            ),
        )
    return url


def big_job(url: str, store: LocalObjectStore, pages: int) -> int:
    """One more job of ``pages`` pages cut into documents of 8 pages, their PDFs in ``store``."""
    state = open_state(StateSettings(database_url=url))
    job, _ = state.register_job(
        sha256="f" * 64, source_uri="file:///nowhere/big.pdf", source_name="big.pdf", kind="pdf", size_bytes=1
    )
    source = pymupdf.open()
    for n in range(1, pages + 1):
        source.new_page(width=595, height=842).insert_text((72, 120), f"Page {n}", fontsize=40)
    keys, records = OutputKeys(state.database_id()), []
    for index, first in enumerate(range(1, pages + 1, PAGES_PER_DOCUMENT)):
        last = min(pages, first + PAGES_PER_DOCUMENT - 1)
        part = pymupdf.open()
        part.insert_pdf(source, from_page=first - 1, to_page=last - 1)
        store.put(keys.document_pdf(job.id, index), part.tobytes(), content_type="application/pdf")
        records.append(
            DocumentRecord(
                job_id=job.id,
                index=index,
                first_page=first,
                last_page=last,
                doc_type="invoice",
                values={"title": f"Invoice {index}", "counterparty": "Acme"},
                pdf_key=keys.document_pdf(job.id, index),
            )
        )
    state.transition(job.id, [JobStatus.PENDING], JobStatus.COMPLETED, pages=pages, progress=1.0)
    state.upsert_documents(job.id, records)
    state.close()
    return job.id


@contextmanager
def served(url: str, store_dir: Path) -> Iterator[int]:
    """The console over ``url`` and ``store_dir`` on a free loopback port."""
    state = open_state(StateSettings(database_url=url))
    settings = StoreSettings(store=str(store_dir))
    console = Console(state, LocalObjectStore(store_dir), settings, prices_for("claude-sonnet-5-5"))
    app = build_app(console, Logins(state, None, has_users=False))
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)
        state.close()


def fetch(port: int, path: str) -> tuple[float, float, bytes]:
    """(ms to the first byte, ms to the last, the body) of one GET."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    start = time.perf_counter()
    conn.request("GET", path)
    answer = conn.getresponse()
    first = answer.read(1)
    first_ms = (time.perf_counter() - start) * 1000
    body = first + answer.read()
    conn.close()
    if answer.status != 200:
        raise RuntimeError(f"{path}: {answer.status}")
    return first_ms, (time.perf_counter() - start) * 1000, body


def usable(port: int, path: str, images: int = 0) -> tuple[float, float]:
    """(first byte, usable) ms of a page: its HTML, CSS and JS (and its first ``images`` page images)."""
    start = time.perf_counter()
    first_ms, _, body = fetch(port, path)
    for asset in ("/static/console.css", "/static/console.js"):
        fetch(port, asset)
    for src in _images(body.decode(), images):
        fetch(port, src)
    return first_ms, (time.perf_counter() - start) * 1000


def _images(html: str, count: int) -> list[str]:
    found = [part.split('"', 1)[0] for part in html.split(' src="')[1:]]
    return [src.replace("&amp;", "&") for src in found if "/pages/" in src][:count]


def timed(port: int, path: str, repeat: int, images: int = 0) -> tuple[float, float]:
    runs = [usable(port, path, images) for _ in range(repeat)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def browser_times(port: int, paths: dict[str, str]) -> dict[str, float]:
    """First byte and DOMContentLoaded of each page in Chromium (Navigation Timing), in ms."""
    from playwright.sync_api import sync_playwright

    figures: dict[str, float] = {}
    args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
    ]
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=str(CHROMIUM), args=args
        )
        page = context.new_page()
        for name, path in paths.items():
            page.goto(f"http://127.0.0.1:{port}{path}", wait_until="domcontentloaded")
            timing = page.evaluate("JSON.stringify(performance.getEntriesByType('navigation')[0])")
            entry = json.loads(timing)
            figures[f"browser_{name}_first_byte_ms"] = round(entry["responseStart"], 1)
            figures[f"browser_{name}_usable_ms"] = round(entry["domContentLoadedEventEnd"], 1)
        context.close()
    return figures


def measure(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    url = synthetic_jobs(home / "state.db", args.jobs)
    job_id = big_job(url, LocalObjectStore(home / "store"), args.pages)
    paths = {
        "runs": "/",
        "jobs": "/jobs",
        "jobs_deep": f"/jobs?before={args.jobs // 2}",
        "job": f"/jobs/{job_id}",
    }
    figures: dict[str, Any] = {"jobs": args.jobs + 1, "job_pages": args.pages}
    with served(url, home / "store") as port:
        for name, path in paths.items():
            first, whole = timed(port, path, args.repeat)
            figures[f"{name}_first_byte_ms"], figures[f"{name}_page_ms"] = round(first, 1), round(whole, 1)
        figures["job_first_screen_ms"] = round(usable(port, paths["job"], FIRST_SCREEN)[1], 1)
        if CHROMIUM.exists() and not args.no_browser:
            figures |= browser_times(port, paths)
    return figures


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    with tempfile.TemporaryDirectory(prefix="raybatch-console-bench-") as home:
        figures = measure(args, Path(home))
    for name, value in figures.items():
        print(f"{name:32} {value}")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
