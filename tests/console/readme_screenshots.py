"""The README's screenshots of the console, on the sample corpus (a script, run by hand):

    .venv/bin/python tests/console/readme_screenshots.py docs/screenshots

The sample bundles' truth stands in for a run's answers (no Ray, no Claude): each bundle a completed
job whose documents are the truth's, a few of them waiting for review; a failed job, a running one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pymupdf

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1])]

from browser import chromium, served  # noqa: E402
from console_builders import CLASSES, ConsoleData, _job  # noqa: E402

from raybatch.console.review_port import DocumentKey, MemoryReviewPort  # noqa: E402
from raybatch.ids import OutputKeys  # noqa: E402
from raybatch.models import DocumentRecord, JobStatus, SourceKind  # noqa: E402
from raybatch.objects import LocalObjectStore  # noqa: E402
from raybatch.samples import write_samples  # noqa: E402
from raybatch.settings import StateSettings, StoreSettings  # noqa: E402
from raybatch.state import SqlStateStore, open_state  # noqa: E402


def sample_console(folder: Path) -> ConsoleData:
    """The sample corpus as a finished run's database and store under ``folder``."""
    truth = write_samples(folder / "samples", bundles=3, seed=7)
    state = open_state(StateSettings(database_url=f"sqlite:///{folder / 'state.db'}"))
    store = LocalObjectStore(folder / "store")
    waiting: set[DocumentKey] = set()
    first = 0
    for bundle in truth["bundles"]:
        job_id, doubtful = _bundle_job(state, store, folder / "samples" / bundle["file"], bundle)
        first = first or job_id
        waiting |= {DocumentKey(job_id, index) for index in doubtful}
    failed = _job(state, "scan_0457.pdf", JobStatus.FAILED)
    state.fail_job(failed, "prepare", "InvalidSource", "scan_0457.pdf is encrypted: no pages can be read")
    running = _job(state, "bundle_104.pdf", JobStatus.SUBMITTED, pages=42)
    state.set_progress({running: 0.45})
    for name in ("bundle_105.pdf", "bundle_106.pdf"):
        _job(state, name, JobStatus.PENDING)
    review = MemoryReviewPort(state, waiting, list(CLASSES))
    return ConsoleData(
        state, store, StoreSettings(store=str(folder / "store")), review, first, failed, running
    )


def _bundle_job(
    state: SqlStateStore, store: LocalObjectStore, path: Path, bundle: dict
) -> tuple[int, list[int]]:
    job, _ = state.register_job(
        sha256=bundle["sha256"],
        source_uri=path.resolve().as_uri(),
        source_name=bundle["file"],
        kind=SourceKind.PDF,
        size_bytes=path.stat().st_size,
    )
    keys, records, doubtful = OutputKeys(state.database_id()), [], []
    rotations = {p["page"]: p["rotation"] for p in bundle["page_info"]}
    with pymupdf.open(path) as source:
        for doc in bundle["documents"]:
            index = doc["index"]
            part = pymupdf.open()
            part.insert_pdf(source, from_page=doc["first_page"] - 1, to_page=doc["last_page"] - 1)
            for n, page in enumerate(part, start=doc["first_page"]):
                page.set_rotation((page.rotation + rotations.get(n, 0)) % 360)
            store.put(keys.document_pdf(job.id, index), part.tobytes(), content_type="application/pdf")
            unsure = index % 4 == 1
            doubtful += [index] if unsure else []
            extra = (
                {"confidence": 0.58, "review": "pending", "review_reasons": ["amount not found on the page"]}
                if unsure
                else {"confidence": 0.97}
            )
            group = doc["group"].lower() if doc.get("group") else None
            records.append(_record(job.id, doc, keys.document_pdf(job.id, index), group, extra))
            if group:
                state.upsert_group(group, doc["group"].replace("|", " · "))
    state.transition(job.id, [JobStatus.PENDING], JobStatus.COMPLETED, pages=bundle["pages"], progress=1.0)
    state.upsert_documents(job.id, records)
    return job.id, doubtful


def _record(job_id: int, doc: dict, pdf_key: str, group: str | None, extra: dict) -> DocumentRecord:
    fields = {
        name: doc.get(name)
        for name in ("title", "date", "number", "counterparty", "amount", "currency", "reference")
    }
    return DocumentRecord(
        job_id=job_id,
        index=doc["index"],
        first_page=doc["first_page"],
        last_page=doc["last_page"],
        doc_type=doc["type"],
        group_key=group,
        pdf_key=pdf_key,
        **extra,
        values=fields,
    )


def main(out: Path) -> None:
    import tempfile

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as home:
        data = sample_console(Path(home))
        with served(data.app()) as base, chromium(Path(home) / "profile") as browser:
            page = browser.new_page()  # type: ignore[attr-defined]
            for name, path in [
                ("runs", "/"),
                ("jobs", "/jobs"),
                ("job", f"/jobs/{data.done}"),
                ("documents", "/documents"),
                ("review", f"/review?job={data.done}&index=5"),
            ]:
                page.goto(base + path)
                page.wait_for_load_state("networkidle")
                page.screenshot(path=str(out / f"console-{name}.png"), full_page=name in ("runs", "jobs"))
        data.state.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
