"""A job: its pages as a strip of thumbnails with its documents drawn as spans over them, each
document's class, fields, confidence and reasons; its failures; links to each document's PDF and
to the source, streamed through the store (the keys and the URI come from the rows, never the
request: the route takes only numbers)."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from raybatch.console.app import Console, console_of, render
from raybatch.console.pages import PageSize, draw_page
from raybatch.cost import cost_usd
from raybatch.errors import ObjectNotFound, RaybatchError
from raybatch.models import DOCUMENT_FIELDS, DocumentRecord, JobRecord, SourceKind, field_values

DOWNLOAD_TYPES = {
    SourceKind.PDF: ("application/pdf", ".pdf"),
    SourceKind.IMAGE: ("application/octet-stream", ""),
}


@dataclass(frozen=True)
class Span:
    """A run of pages in the strip: a document's, or pages no document holds (``document`` None)."""

    first_page: int
    last_page: int
    document: DocumentRecord | None

    @property
    def pages(self) -> range:
        return range(self.first_page, self.last_page + 1)


def spans(pages: int, documents: list[DocumentRecord]) -> list[Span]:
    """The strip of a job of ``pages`` pages: its documents in page order, gaps between them."""
    found: list[Span] = []
    at = 1
    for doc in sorted(documents, key=lambda d: d.first_page):
        if doc.first_page > at:
            found.append(Span(at, doc.first_page - 1, None))
        found.append(Span(doc.first_page, doc.last_page, doc))
        at = max(at, doc.last_page + 1)
    if at <= pages:
        found.append(Span(at, pages, None))
    return found


def job_of(console: Console, job_id: int) -> JobRecord:
    """The job, or 404."""
    try:
        return console.state.get_job(job_id)
    except KeyError:
        raise HTTPException(404, f"no job {job_id}") from None


def _job_page(console: Console, job_id: int) -> dict[str, object]:
    job = job_of(console, job_id)
    documents = console.state.list_documents(job_id)
    pages = max([job.pages or 0, *(d.last_page for d in documents)])
    usage = console.state.request_totals([job_id]).usage_by_mode
    return {
        "job": job,
        "documents": documents,
        "spans": spans(pages, documents),
        "fields": [spec.name for spec in DOCUMENT_FIELDS],
        "values": {d.index: field_values(d) for d in documents},
        "errors": console.state.list_errors(job_id),
        "chunks": console.state.chunk_counts([job_id]).get(job_id, {}),
        "cost_usd": cost_usd(usage, console.prices),
    }


async def job_page(request: Request) -> Response:
    context = await run_in_threadpool(_job_page, console_of(request), request.path_params["job_id"])
    return render(request, "job.html", context)


def _page_image(console: Console, job_id: int, page: int, size: PageSize) -> bytes:
    job = job_of(console, job_id)
    documents = console.state.list_documents(job_id)
    version = tuple((d.index, d.first_page, d.last_page, d.pdf_key) for d in documents)
    cached = console.pages.get((job_id, page, size, version))
    if cached is not None:
        return cached
    try:
        image = draw_page(console.store, console.store_settings, job, documents, page, size)
    except RaybatchError:  # the object or the source is gone or unreadable here
        image = None
    if image is None:
        raise HTTPException(404, f"page {page} of job {job_id} cannot be drawn here")
    console.pages.put((job_id, page, size, version), image)
    return image


async def page_image(request: Request) -> Response:
    size = request.query_params.get("size", PageSize.SMALL.value)
    if size not in {s.value for s in PageSize}:
        raise HTTPException(400, "size is s or l")
    job_id, page = request.path_params["job_id"], request.path_params["page"]
    image = await run_in_threadpool(_page_image, console_of(request), job_id, page, PageSize(size))
    return Response(image, media_type="image/png", headers={"cache-control": "private, max-age=60"})


def document_of(console: Console, job_id: int, index: int) -> DocumentRecord:
    """The document, or 404."""
    try:
        return console.state.get_document(job_id, index)
    except KeyError:
        raise HTTPException(404, f"no document {index} in job {job_id}") from None


def _object(console: Console, key: str | None) -> bytes:
    if not key:
        raise HTTPException(404, "this document has no such object (yet)")
    try:
        return console.store.get(key)
    except ObjectNotFound:
        raise HTTPException(404, "the object is not in the store") from None


async def document_pdf(request: Request) -> Response:
    console, (job_id, index) = console_of(request), _document_ids(request)
    doc = await run_in_threadpool(document_of, console, job_id, index)
    data = await run_in_threadpool(_object, console, doc.pdf_key)
    disposition = f'inline; filename="job-{job_id}-document-{index}.pdf"'
    return Response(data, media_type="application/pdf", headers={"content-disposition": disposition})


async def document_thumb(request: Request) -> Response:
    console, (job_id, index) = console_of(request), _document_ids(request)
    doc = await run_in_threadpool(document_of, console, job_id, index)
    data = await run_in_threadpool(_object, console, doc.thumb_key)
    return Response(data, media_type="image/webp", headers={"cache-control": "private, max-age=60"})


def _source(console: Console, job_id: int) -> tuple[JobRecord, bytes]:
    from raybatch.sources import read_source

    job = job_of(console, job_id)
    try:
        return job, read_source(job.source_uri, console.store_settings, sha256=job.sha256)
    except RaybatchError as exc:
        raise HTTPException(
            404, f"the source of job {job_id} cannot be read here: {type(exc).__name__}"
        ) from None


async def source_file(request: Request) -> Response:
    job, data = await run_in_threadpool(_source, console_of(request), request.path_params["job_id"])
    media_type, suffix = DOWNLOAD_TYPES[job.kind]
    disposition = f'attachment; filename="job-{job.id}-source{suffix}"'
    return Response(data, media_type=media_type, headers={"content-disposition": disposition})


def _document_ids(request: Request) -> tuple[int, int]:
    return request.path_params["job_id"], request.path_params["index"]


ROUTES = [
    Route("/jobs/{job_id:int}", job_page),
    Route("/jobs/{job_id:int}/pages/{page:int}.png", page_image),
    Route("/jobs/{job_id:int}/documents/{index:int}.pdf", document_pdf),
    Route("/jobs/{job_id:int}/documents/{index:int}.webp", document_thumb),
    Route("/jobs/{job_id:int}/source", source_file),
]
