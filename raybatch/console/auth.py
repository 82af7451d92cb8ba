"""Who is looking: no login on loopback, else users (argon2 hashes in ``console_users``) or a token.

``LoginGate`` puts the viewer on every request (``request.state.viewer``); once a login is
configured, a request without a logged-in session is sent to ``/login`` (or refused with 401 for
anything but a page). The session is a signed cookie (Starlette's ``SessionMiddleware``) holding
the user's name, role and CSRF token, never a password or the token.
"""

from __future__ import annotations

import functools
import getpass
import hmac
import re
import secrets
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from pydantic import SecretStr
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from raybatch.errors import ConfigError
from raybatch.models import ConsoleRole
from raybatch.state.port import ConsoleUsers

PUBLIC_PATHS = ("/login", "/static/")
USER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
MIN_PASSWORD = 8
TOKEN_USER = "token"  # the reviewer's name for corrections made with the token
_HASHER = PasswordHasher()


@dataclass(frozen=True)
class Viewer:
    """The person behind a request: a name (a correction's reviewer) and a role."""

    name: str
    role: ConsoleRole

    @property
    def can_review(self) -> bool:
        return self.role is ConsoleRole.REVIEWER


def local_viewer() -> Viewer:
    """Who reviews on a loopback console without a login: the local account, as a reviewer."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = "local"
    return Viewer(f"local:{name}", ConsoleRole.REVIEWER)


def hash_password(password: str) -> str:
    """An argon2id hash of ``password`` (ConfigError for one that is too short)."""
    if len(password) < MIN_PASSWORD:
        raise ConfigError(f"a password has at least {MIN_PASSWORD} characters")
    return _HASHER.hash(password)


def add_user(users: ConsoleUsers, name: str, role: ConsoleRole, password: str) -> None:
    """Add (or replace) a console user; ConfigError for a name that is not a plain login name."""
    if not USER_NAME.fullmatch(name):
        raise ConfigError("a user name is 1-64 letters, digits and . _ @ -, starting with a letter or digit")
    users.put_console_user(name, role, hash_password(password))


@dataclass(frozen=True)
class Logins:
    """The configured ways to log in: the users table, a token, or neither (loopback only)."""

    users: ConsoleUsers
    token: SecretStr | None
    has_users: bool

    @property
    def required(self) -> bool:
        return self.has_users or self.token is not None

    def check(self, name: str, password: str) -> Viewer | None:
        """The viewer these credentials log in, or None."""
        user = self.users.get_console_user(name) if USER_NAME.fullmatch(name) else None
        if user is not None or self.token is None:
            # A missing user costs the same hash as a wrong password: the answer's time tells nothing.
            try:
                _HASHER.verify(user.password_hash if user else _dummy_hash(), password)
            except (VerificationError, InvalidHashError):
                return None
            return Viewer(user.name, user.role) if user else None
        token = self.token.get_secret_value().encode() if self.token else b""
        if token and hmac.compare_digest(password.encode(), token):
            return Viewer(TOKEN_USER, ConsoleRole.REVIEWER)
        return None


@functools.cache
def _dummy_hash() -> str:
    return _HASHER.hash(secrets.token_urlsafe(16))


def log_in(request: Request, viewer: Viewer) -> None:
    """Remember ``viewer`` in the session (a fresh CSRF token with it)."""
    request.session.clear()
    request.session.update({"user": viewer.name, "role": viewer.role.value})


class LoginGate:
    """Pure ASGI middleware: the viewer on every request; a login asked for where one is needed."""

    def __init__(self, app: ASGIApp, logins: Logins) -> None:
        self.app = app
        self.logins = logins
        self.local = local_viewer()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        viewer = self._viewer(scope)
        scope.setdefault("state", {})["viewer"] = viewer
        path: str = scope["path"]
        if viewer is None and not path.startswith(PUBLIC_PATHS):
            wants_page = scope["method"] == "GET" and not path.startswith("/api/")
            response = (
                RedirectResponse("/login", 303) if wants_page else PlainTextResponse("log in first", 401)
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _viewer(self, scope: Scope) -> Viewer | None:
        if not self.logins.required:
            return self.local
        session = scope.get("session") or {}
        if "user" not in session:
            return None
        return Viewer(str(session["user"]), ConsoleRole(session.get("role", ConsoleRole.READER.value)))
