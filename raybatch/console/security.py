"""The console's guards that hold for every request: who may reach it, the headers every answer
carries, and the checks on every change (CSRF, role).

- **Reach**: without a login the console answers on loopback only: ``check_reach`` refuses to
  start on another address (exit 2), and ``TrustedHostMiddleware`` refuses Host headers that are
  not loopback names (a DNS-rebinding page cannot drive it).
- **Headers**: ``SecurityHeaders`` adds a strict Content-Security-Policy (own scripts and styles
  only, no framing), X-Frame-Options, X-Content-Type-Options, Referrer-Policy, and no-store.
- **Changes**: every POST is refused unless its CSRF token (form field ``csrf_token`` or header
  ``X-CSRF-Token``) matches the session's, and its Origin, when sent, is this console's.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Mapping
from typing import Any

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from raybatch.errors import ConfigError
from raybatch.models import ConsoleRole

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
HEADERS: Mapping[str, str] = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) is this machine's loopback only."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_reach(host: str, login_configured: bool) -> None:
    """Refuse (ConfigError, exit 2) to serve a non-loopback address without a login."""
    if not is_loopback(host) and not login_configured:
        raise ConfigError(
            f"--host {host} is reachable from other machines, and no login is configured: add a user "
            "(raybatch users add NAME --role reviewer) or set CONSOLE_TOKEN, or serve on 127.0.0.1"
        )


class SecurityHeaders:
    """Pure ASGI middleware: the security headers on every HTTP answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                added = [(k.encode(), v.encode()) for k, v in HEADERS.items() if k.encode() not in present]
                if b"cache-control" not in present:
                    added.append((b"cache-control", b"no-store"))
                message["headers"] = [*message.get("headers", []), *added]
            await send(message)

        await self.app(scope, receive, with_headers)


def csrf_token(request: Request) -> str:
    """The session's CSRF token (made on first use)."""
    session: dict[str, Any] = request.session
    if CSRF_FIELD not in session:
        session[CSRF_FIELD] = secrets.token_urlsafe(32)
    return str(session[CSRF_FIELD])


async def checked_form(request: Request) -> FormData:
    """The POSTed form, once its CSRF token and Origin are checked (403 otherwise)."""
    form = await request.form()
    given = request.headers.get(CSRF_HEADER) or str(form.get(CSRF_FIELD) or "")
    expected = request.session.get(CSRF_FIELD)
    if not expected or not hmac.compare_digest(given.encode(), str(expected).encode()):
        raise HTTPException(403, "the form's CSRF token is missing or stale: reload the page")
    origin = request.headers.get("origin")
    if origin and origin.rstrip("/") != f"{request.url.scheme}://{request.url.netloc}":
        raise HTTPException(403, "a change asked for from another site")
    return form


def require_reviewer(request: Request) -> str:
    """The logged-in reviewer's name; 403 for a reader."""
    viewer = request.state.viewer
    if viewer.role is not ConsoleRole.REVIEWER:
        raise HTTPException(403, f"{viewer.name} may read, not review")
    return str(viewer.name)
