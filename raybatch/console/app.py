"""The console's app: one Starlette application over the state store, the object store and the
review ledger, built by ``build_app``; the views (``views/``) are one small module per kind of page.

Middleware, outermost first: security headers on every answer; loopback Host names only when no
login is configured; the signed session cookie; the login gate (the viewer on every request).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from raybatch.console.auth import LoginGate, Logins
from raybatch.console.pages import PageCache
from raybatch.console.review_port import ReviewPort
from raybatch.console.security import LOOPBACK_NAMES, SecurityHeaders, csrf_token
from raybatch.cost import ModelPrices
from raybatch.errors import TransientError
from raybatch.objects import ObjectStore
from raybatch.settings import StoreSettings
from raybatch.state import StateStore

HERE = Path(__file__).parent
SESSION_COOKIE = "raybatch_console"


@dataclass
class Console:
    """What every view reads: the ports, the prices, and how the pages behave."""

    state: StateStore
    store: ObjectStore
    store_settings: StoreSettings
    prices: ModelPrices
    review: ReviewPort | None = None
    poll_ms: int = 2000  # how often a page showing a run asks for its progress
    page_size: int = 50
    summary_seconds: float = 2.0  # the overview's aggregates are shared this long by every viewer
    pages: PageCache = field(default_factory=PageCache)
    summaries: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)


def console_of(request: Request) -> Console:
    """The console serving ``request``."""
    console: Console = request.app.state.console
    return console


_TEMPLATES = Environment(
    loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True), auto_reload=False
)


def render(
    request: Request, template: str, context: dict[str, Any] | None = None, status: int = 200
) -> HTMLResponse:
    """A page from its template, with the viewer, the CSRF token and a flashed message."""
    viewer = request.state.viewer
    console = console_of(request)
    flash = request.session.pop("flash", None)
    review_waiting = console.review.pending_count() if console.review is not None else None
    page = _TEMPLATES.get_template(template).render(
        request=request,
        viewer=viewer,
        csrf=csrf_token(request),
        flash=flash,
        review_waiting=review_waiting,
        poll_ms=console.poll_ms,
        **(context or {}),
    )
    return HTMLResponse(page, status)


async def _error(request: Request, exc: Exception) -> Response:
    """An error page; a database or store outage is a 503 (try again), never a traceback."""
    status, detail = 500, "the console failed on this page"
    if isinstance(exc, HTTPException):
        status, detail = exc.status_code, str(exc.detail)
    elif isinstance(exc, TransientError):
        status, detail = (
            503,
            f"{type(exc).__name__}: the database or the store does not answer now; try again",
        )
    if getattr(request.state, "viewer", None) is not None and "session" in request.scope:
        try:
            return render(request, "error.html", {"status": status, "detail": detail}, status)
        except Exception:  # the page itself needs the database: say it plainly
            pass
    return Response(detail, status, media_type="text/plain")


def build_app(console: Console, logins: Logins, *, session_secret: str | None = None) -> Starlette:
    """The console's application over ``console``'s ports, guarded by ``logins``."""
    middleware = [Middleware(SecurityHeaders)]
    if not logins.required:  # loopback only: a page elsewhere cannot reach it by a rebound name
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(LOOPBACK_NAMES)))
    middleware += [
        Middleware(
            SessionMiddleware,
            secret_key=session_secret or secrets.token_urlsafe(32),
            session_cookie=SESSION_COOKIE,
            same_site="strict",
            max_age=12 * 3600,
        ),
        Middleware(LoginGate, logins=logins),
    ]
    app = Starlette(
        routes=_routes(),
        middleware=middleware,
        exception_handlers={HTTPException: _error, TransientError: _error, Exception: _error},
    )
    app.state.console = console
    app.state.logins = logins
    return app


def _routes() -> list[BaseRoute]:
    from raybatch.console.views import documents, job, jobs, login, review, runs

    return [
        *runs.ROUTES,
        *jobs.ROUTES,
        *job.ROUTES,
        *documents.ROUTES,
        *review.ROUTES,
        *login.ROUTES,
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
