"""A small state database and store for the console's tests: a finished job with real PDFs, a
failed one, one in progress, groups, and a fake review ledger holding two documents."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import pymupdf
from PIL import Image
from starlette.applications import Starlette

from raybatch.console.app import Console, build_app
from raybatch.console.auth import Logins
from raybatch.console.review_port import DocumentKey, MemoryReviewPort
from raybatch.cost import prices_for
from raybatch.ids import OutputKeys, sha256_bytes
from raybatch.models import DocumentRecord, JobStatus, SourceKind
from raybatch.objects import LocalObjectStore
from raybatch.settings import StateSettings, StoreSettings
from raybatch.state import SqlStateStore, open_state

CLASSES = ["invoice", "contract", "act", "letter"]
# (first page, last page, class, counterparty, reference, date): the finished job's documents
DOCUMENTS = [
    (1, 2, "invoice", "Acme Ltd", "C-100", "2026-03-04"),
    (3, 5, "contract", "Acme Ltd", "C-100", "2026-02-01"),
    (6, 6, "letter", "Globex", "", "2026-05-20"),
]


@dataclass
class ConsoleData:
    """What a console test works on."""

    state: SqlStateStore
    store: LocalObjectStore
    store_settings: StoreSettings
    review: MemoryReviewPort
    done: int  # the finished job
    failed: int
    running: int

    def console(self, poll_ms: int = 2000) -> Console:
        return Console(
            state=self.state,
            store=self.store,
            store_settings=self.store_settings,
            prices=prices_for("claude-sonnet-5-5"),
            review=self.review,
            poll_ms=poll_ms,
        )

    def app(self, logins: Logins | None = None, poll_ms: int = 2000) -> Starlette:
        return build_app(self.console(poll_ms), logins or Logins(self.state, None, has_users=False))


def bundle_pdf(pages: int) -> bytes:
    """A PDF of ``pages`` pages, each saying its number large."""
    doc = pymupdf.open()
    for n in range(1, pages + 1):
        page = doc.new_page(width=595, height=842)
        page.insert_text((72, 140), f"Page {n}", fontsize=48)
        page.insert_text((72, 200), "raybatch console test bundle", fontsize=16)
    data = doc.tobytes()
    doc.close()
    return bytes(data)


def _slice(source: bytes, first: int, last: int) -> bytes:
    with pymupdf.open(stream=source, filetype="pdf") as whole, pymupdf.open() as part:
        part.insert_pdf(whole, from_page=first - 1, to_page=last - 1)
        return bytes(part.tobytes())


def _thumb() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (60, 84), "white").save(out, format="WEBP")
    return out.getvalue()


def build_console_data(folder: Path, *, pages: int = 6, documents: list[tuple] | None = None) -> ConsoleData:
    """The database, store and source files of the console's tests, under ``folder``."""
    state = open_state(StateSettings(database_url=f"sqlite:///{folder / 'state.db'}"))
    store_settings = StoreSettings(store=str(folder / "store"))
    store = LocalObjectStore(folder / "store")
    source = bundle_pdf(pages)
    path = folder / "bundle.pdf"
    path.write_bytes(source)
    done = _finished_job(state, store, path, source, documents or DOCUMENTS)
    failed = _job(state, "broken.pdf", JobStatus.FAILED)
    state.fail_job(failed, "prepare", "InvalidSource", "broken.pdf is not a PDF (no %PDF header)")
    running = _job(state, "running.pdf", JobStatus.PREPARING, pages=12)
    review = MemoryReviewPort(state, {DocumentKey(done, 0), DocumentKey(done, 1)}, list(CLASSES))
    return ConsoleData(state, store, store_settings, review, done, failed, running)


def _job(state: SqlStateStore, name: str, status: JobStatus, pages: int | None = None) -> int:
    job, _ = state.register_job(
        sha256=sha256_bytes(name.encode()),
        source_uri=f"file:///nowhere/{name}",
        source_name=name,
        kind=SourceKind.PDF,
        size_bytes=1000,
    )
    if status is not JobStatus.PENDING and status is not JobStatus.FAILED:
        state.transition(job.id, [JobStatus.PENDING], status, pages=pages)
    return job.id


def _finished_job(
    state: SqlStateStore, store: LocalObjectStore, path: Path, source: bytes, documents: list[tuple]
) -> int:
    job, _ = state.register_job(
        sha256=sha256_bytes(source),
        source_uri=path.resolve().as_uri(),
        source_name="bundle.pdf",
        kind=SourceKind.PDF,
        size_bytes=len(source),
    )
    keys = OutputKeys(state.database_id())
    records = []
    for index, (first, last, kind, party, reference, date) in enumerate(documents):
        pdf_key, thumb_key = keys.document_pdf(job.id, index), keys.document_thumb(job.id, index)
        store.put(pdf_key, _slice(source, first, last), content_type="application/pdf")
        store.put(thumb_key, _thumb(), content_type="image/webp")
        group = f"{party.lower().replace(' ', '-')}/{reference.lower()}" if reference else None
        records.append(
            DocumentRecord(
                job_id=job.id,
                index=index,
                first_page=first,
                last_page=last,
                doc_type=kind,
                values={
                    "title": f"{kind.title()} {index + 1}",
                    "date": date,
                    "number": f"N-{index + 1}",
                    "counterparty": party,
                    "amount": 100.0 * (index + 1),
                    "currency": "EUR",
                    "reference": reference or None,
                },
                group_key=group,
                pdf_key=pdf_key,
                thumb_key=thumb_key,
                **(
                    {"confidence": 0.62, "review": "pending", "review_reasons": ["low confidence"]}
                    if index < 2
                    else {}
                ),
            )
        )
        if group:
            state.upsert_group(group, f"{party} · {reference}")
    state.transition(
        job.id,
        [JobStatus.PENDING],
        JobStatus.COMPLETED,
        pages=len(documents) and documents[-1][1],
        progress=1.0,
    )
    state.upsert_documents(job.id, records)
    return job.id
