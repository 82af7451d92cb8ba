"""The overview of the database's runs: jobs by status, overall progress, cost and spend cap,
review counts and the latest failures; ``/api/summary`` gives the same figures to the page's poll."""

from __future__ import annotations

import time
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from raybatch.console.app import Console, console_of, render
from raybatch.models import JobStatus
from raybatch.report import status_summary

LATEST_FAILURES = 10


def summary(console: Console) -> dict[str, Any]:
    """The run's figures, as ``raybatch status`` has them; computed at most every
    ``summary_seconds`` (aggregates over every job: ~0.3 s on 100,000) and shared by every viewer."""
    made, figures = console.summaries.get("all", (0.0, {}))
    if time.monotonic() - made > console.summary_seconds:
        figures = _figures(console)
        console.summaries["all"] = (time.monotonic(), figures)
    return figures


def _figures(console: Console) -> dict[str, Any]:
    """Status counts, progress, cost, spend and review waiting."""
    figures = status_summary(console.state, console.prices)
    ended = sum(figures["by_status"][s.value] for s in JobStatus if s.terminal)
    figures["ended"] = ended
    figures["done_fraction"] = ended / figures["jobs"] if figures["jobs"] else 0.0
    figures["review_waiting"] = console.review.pending_count() if console.review is not None else None
    return figures


async def overview(request: Request) -> Response:
    console = console_of(request)
    figures = await run_in_threadpool(summary, console)
    failed = await run_in_threadpool(console.state.page_jobs, [JobStatus.FAILED], limit=LATEST_FAILURES)
    return render(request, "runs.html", {"figures": figures, "failed": failed, "statuses": list(JobStatus)})


async def summary_json(request: Request) -> Response:
    figures = await run_in_threadpool(summary, console_of(request))
    return JSONResponse(figures)


ROUTES = [Route("/", overview), Route("/api/summary", summary_json)]
