"""The closing instruction of every chunk request; the system prompt is rendered from the classes
file (``raybatch.classes.prompt``), and the processing key hashes it.
"""

from __future__ import annotations


def default_system_prompt() -> str:
    """The system prompt under the default classes file (``raybatch.classes.prompt`` renders any)."""
    from raybatch.classes import default_classes
    from raybatch.classes.prompt import system_prompt

    return system_prompt(default_classes())


def closing_instruction(first_page: int, last_page: int) -> str:
    """The last text block of a chunk request: which pages to answer for."""
    return (
        f"These are pages {first_page} to {last_page} of the bundle. "
        "Return the JSON answer for exactly these pages."
    )


SYSTEM_PROMPT = default_system_prompt()  # the default file's prompt
