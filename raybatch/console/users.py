"""``raybatch users add|list``: the console's logins (argon2 hashes in ``console_users``)."""

from __future__ import annotations

import getpass
import sys

from raybatch.console.auth import add_user
from raybatch.errors import ConfigError
from raybatch.models import ConsoleRole
from raybatch.settings import Settings, StateSettings
from raybatch.state import open_state


def users_command(
    settings: Settings,
    action: str,
    name: str | None,
    role: str | None,
    from_stdin: bool,
    *,
    as_json: bool = False,
) -> int:
    """Add a user (``add``: the password asked twice, or one line of stdin), or list the users."""
    from raybatch.commands import Said

    said = Said(as_json)
    state = open_state(settings.section(StateSettings), existing=action != "add")
    if action != "add":
        users = state.list_console_users()
        for user in users:
            said.line(f"{user.name}\t{user.role.value}")
        return said.end(0, users={user.name: user.role.value for user in users})
    assert name is not None
    add_user(state, name, ConsoleRole(role or ConsoleRole.READER.value), _password(from_stdin))
    said.line(f"user {name} can log in to the console as a {role}")
    return said.end(0, user=name, role=role)


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\n")
    first = getpass.getpass("password: ")
    if getpass.getpass("again: ") != first:
        raise ConfigError("the passwords differ")
    return first
