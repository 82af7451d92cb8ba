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
    settings: Settings, action: str, name: str | None, role: str | None, from_stdin: bool
) -> int:
    """Add a user (``add``: the password asked twice, or one line of stdin), or list the users."""
    state = open_state(settings.section(StateSettings))
    if action != "add":
        for user in state.list_console_users():
            print(f"{user.name}\t{user.role.value}")
        return 0
    assert name is not None
    add_user(state, name, ConsoleRole(role or ConsoleRole.READER.value), _password(from_stdin))
    print(f"user {name} can log in to the console as a {role}")
    return 0


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\n")
    first = getpass.getpass("password: ")
    if getpass.getpass("again: ") != first:
        raise ConfigError("the passwords differ")
    return first
