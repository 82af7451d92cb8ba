"""Documents: search by class, a field's text, group and date, in keyset pages; and the groups."""

from __future__ import annotations

import re

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from raybatch.console.app import console_of, render
from raybatch.console.views.jobs import keyset
from raybatch.state.port import DocumentQuery

_DATE = re.compile(r"[0-9]{4}(-[0-9]{2}(-[0-9]{2})?)?")
MAX_TEXT = 200


def document_query(request: Request) -> DocumentQuery:
    """The search the query string asks for; 400 for a date that is not ISO (yyyy[-mm[-dd]])."""
    params = request.query_params
    dates = {name: params.get(name, "") for name in ("from", "to")}
    if any(value and not _DATE.fullmatch(value) for value in dates.values()):
        raise HTTPException(400, "dates are yyyy-mm-dd")
    return DocumentQuery(
        doc_type=params.get("class", "")[:64],
        text=params.get("q", "")[:MAX_TEXT],
        group_key=params.get("group", "")[:500],
        date_from=dates["from"],
        date_to=dates["to"] and dates["to"] + "\uffff",  # "2026-05" takes in every day of May
    )


async def document_list(request: Request) -> Response:
    console = console_of(request)
    query, before = document_query(request), keyset(request)
    found = await run_in_threadpool(
        console.state.page_documents, query, before=before, limit=console.page_size
    )
    classes = await run_in_threadpool(console.state.document_classes)
    more = found[-1].row_id if len(found) == console.page_size else None
    shown = {"class": query.doc_type, "q": query.text, "group": query.group_key}
    shown |= {"from": request.query_params.get("from", ""), "to": request.query_params.get("to", "")}
    return render(
        request, "documents.html", {"found": found, "classes": classes, "shown": shown, "more": more}
    )


async def group_list(request: Request) -> Response:
    search = request.query_params.get("q", "")[:MAX_TEXT]
    found = await run_in_threadpool(console_of(request).state.page_groups, search=search)
    return render(request, "groups.html", {"groups": found, "search": search})


ROUTES = [Route("/documents", document_list), Route("/groups", group_list)]
