"""Logging in and out (a form with CSRF, like every change)."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from raybatch.console.app import render
from raybatch.console.auth import Logins, log_in
from raybatch.console.security import checked_form

LOG_IN_FAILED = "wrong name or password"


async def login_page(request: Request) -> Response:
    logins: Logins = request.app.state.logins
    if not logins.required:
        return RedirectResponse("/", 303)
    return render(request, "login.html", {"token_only": not logins.has_users})


async def login(request: Request) -> Response:
    logins: Logins = request.app.state.logins
    form = await checked_form(request)
    name, password = str(form.get("name") or "")[:64], str(form.get("password") or "")[:1024]
    viewer = await run_in_threadpool(logins.check, name, password)
    if viewer is None:
        context = {"token_only": not logins.has_users, "failed": LOG_IN_FAILED}
        return render(request, "login.html", context, 401)
    log_in(request, viewer)
    return RedirectResponse("/", 303)


async def logout(request: Request) -> Response:
    await checked_form(request)
    request.session.clear()
    return RedirectResponse("/login", 303)


ROUTES = [
    Route("/login", login_page, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
]
