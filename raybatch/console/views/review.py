"""The review queue: the next document waiting for a person, its pages large, keyboard first
(``static/console.js``: a accept, s split before the chosen page, m merge with the next, c change
the class, e edit a field, j/k next/previous). Each action is a POSTed form (CSRF-checked, a
reviewer's only) that becomes one correction in the ledger (``ReviewPort.apply``), made by the
logged-in user; the page it leads to shows the result."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from raybatch.console.app import Console, console_of, render
from raybatch.console.review_port import (
    Correction,
    CorrectionKind,
    DocumentKey,
    PendingDocument,
    ReviewPort,
    ReviewRefused,
)
from raybatch.console.security import checked_form, require_reviewer
from raybatch.console.views.job import document_of, job_of
from raybatch.models import DOCUMENT_FIELDS, field_values

FIELD_NAMES = tuple(spec.name for spec in DOCUMENT_FIELDS)
MAX_VALUE = 500


def ledger(console: Console) -> ReviewPort:
    """The review ledger, or 404 where this console has none."""
    if console.review is None:
        raise HTTPException(404, "no review ledger is connected to this console")
    return console.review


def _shown_key(request: Request) -> DocumentKey | None:
    job, index = request.query_params.get("job", ""), request.query_params.get("index", "")
    if not job and not index:
        return None
    if not (job.isdigit() and index.isdigit() and len(job) <= 12 and len(index) <= 6):
        raise HTTPException(400, "job and index are numbers")
    return DocumentKey(int(job), int(index))


def _queue_page(console: Console, key: DocumentKey | None) -> dict[str, object]:
    review = ledger(console)
    shown: PendingDocument | None = review.pending(key) if key is not None else None
    shown = shown or review.next_pending(key)
    if shown is None:
        return {"shown": None, "waiting": review.pending_count()}
    doc = document_of(console, shown.key.job_id, shown.key.index)
    return {
        "shown": shown,
        "doc": doc,
        "job": job_of(console, shown.key.job_id),
        "values": field_values(doc),
        "fields": FIELD_NAMES,
        "classes": review.classes(),
        "waiting": review.pending_count(),
        "next": review.next_pending(shown.key),
        "previous": review.previous_pending(shown.key),
    }


async def queue(request: Request) -> Response:
    context = await run_in_threadpool(_queue_page, console_of(request), _shown_key(request))
    return render(request, "review.html", context)


def correction_from(form: FormData, key: DocumentKey, reviewer: str, classes: list[str]) -> Correction:
    """The correction a review form asks for; 400 for anything the form could not have sent."""
    action, version = str(form.get("action") or ""), str(form.get("version") or "")
    if action not in {k.value for k in CorrectionKind} or not version.isdigit():
        raise HTTPException(400, "unknown review action")
    kind, name, value = CorrectionKind(action), str(form.get("name") or ""), str(form.get("value") or "")
    page_text = str(form.get("page") or "")
    if len(value) > MAX_VALUE or (page_text and not page_text.isdigit()):
        raise HTTPException(400, "a value is at most 500 characters; a page is a number")
    if kind is CorrectionKind.SET_FIELD and name not in FIELD_NAMES:
        raise HTTPException(400, "unknown field")
    if kind is CorrectionKind.SET_CLASS and value not in classes:
        raise HTTPException(400, "unknown class")
    page = int(page_text) if page_text else None
    return Correction(kind, key, int(version), reviewer, name=name, value=value, page=page)


def _apply(
    console: Console, form: FormData, key: DocumentKey, reviewer: str
) -> tuple[str, DocumentKey | None]:
    review = ledger(console)
    document_of(console, key.job_id, key.index)  # 404 for a document that is not there
    correction = correction_from(form, key, reviewer, review.classes())
    try:
        applied = review.apply(correction)
    except ReviewRefused as exc:
        return f"not done: {exc}", key
    following = review.pending(key) or review.next_pending(key)
    return applied.message, following.key if following else None


async def correct(request: Request) -> Response:
    reviewer = require_reviewer(request)
    form = await checked_form(request)
    key = DocumentKey(request.path_params["job_id"], request.path_params["index"])
    message, following = await run_in_threadpool(_apply, console_of(request), form, key, reviewer)
    request.session["flash"] = message
    target = f"/review?job={following.job_id}&index={following.index}" if following else "/review"
    return RedirectResponse(target, 303)


ROUTES = [
    Route("/review", queue, methods=["GET"]),
    Route("/review/{job_id:int}/{index:int}", correct, methods=["POST"]),
]
