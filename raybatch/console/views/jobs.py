"""The jobs list: filters (status, file name), keyset pages (``before`` the last id shown), and
``/api/progress`` for the page's poll of the jobs it shows."""

from __future__ import annotations

import re

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from raybatch.console.app import console_of, render
from raybatch.models import JobStatus, ReviewState

MAX_POLLED = 500
_IDS = re.compile(r"[0-9]{1,12}(,[0-9]{1,12}){0,499}")


def keyset(request: Request, name: str = "before") -> int | None:
    """The page's keyset position from the query (a positive id), or None; 400 otherwise."""
    value = request.query_params.get(name, "")
    if not value:
        return None
    if not value.isdigit() or len(value) > 12:
        raise HTTPException(400, f"{name} is a job or row id")
    return int(value)


def chosen_statuses(request: Request) -> list[JobStatus]:
    """The statuses asked for (``status=failed&status=pending``); 400 for an unknown one."""
    known = {s.value: s for s in JobStatus}
    asked = [value for value in request.query_params.getlist("status") if value]
    if any(value not in known for value in asked):
        raise HTTPException(400, "unknown status")
    return [known[value] for value in asked]


async def job_list(request: Request) -> Response:
    console = console_of(request)
    statuses, search = chosen_statuses(request), request.query_params.get("q", "")[:200]
    before = keyset(request)
    jobs = await run_in_threadpool(
        console.state.page_jobs, statuses, search=search, before=before, limit=console.page_size
    )
    review = await run_in_threadpool(console.state.review_totals_by_job, [j.id for j in jobs])
    more = jobs[-1].id if len(jobs) == console.page_size else None
    chosen = [s.value for s in statuses]
    context = {"jobs": jobs, "statuses": list(JobStatus), "chosen": chosen, "search": search, "more": more}
    context["review"] = {job_id: reviews_of(totals) for job_id, totals in review.items()}
    return render(request, "jobs.html", {**context, "before": before})


async def progress_json(request: Request) -> Response:
    ids = request.query_params.get("ids", "")
    if not _IDS.fullmatch(ids):
        raise HTTPException(400, f"ids is a comma-separated list of up to {MAX_POLLED} job ids")
    found = await run_in_threadpool(console_of(request).state.job_progress, [int(i) for i in ids.split(",")])
    rows = [{"id": p.id, "status": p.status.value, "progress": p.progress, "pages": p.pages} for p in found]
    return JSONResponse({"jobs": rows})


ROUTES = [Route("/jobs", job_list), Route("/api/progress", progress_json)]


def reviews_of(totals: dict[str, int]) -> str:
    """A job's review figures as the jobs list shows them: waiting, and reviewed."""
    waiting = totals.get(ReviewState.PENDING.value, 0)
    done = totals.get(ReviewState.ACCEPTED.value, 0) + totals.get(ReviewState.CORRECTED.value, 0)
    return " · ".join([*([f"{waiting} waiting"] if waiting else []), *([f"{done} reviewed"] if done else [])])
