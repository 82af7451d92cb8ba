"""How a page's number and text appear in a request, and how a reader gets them back out.

Each page in a request's user message is a text block starting ``Page N:`` (its text follows on the
next lines when there is any), then, unless the page goes as text only, its image block.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_HEADER = re.compile(r"\APage (\d+):(?:\n|$)")


def page_text_block(page: int, text: str) -> dict[str, str]:
    """The text block that introduces page ``page``."""
    body = text.strip()
    return {"type": "text", "text": f"Page {page}:\n{body}" if body else f"Page {page}:"}


def pages_from_params(params: Mapping[str, Any]) -> list[tuple[int, str]]:
    """(page, text) for every page in a Messages request, in order."""
    pages: list[tuple[int, str]] = []
    for message in params.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") != "text":
                continue
            match = _HEADER.match(block.get("text", ""))
            if match:
                pages.append((int(match.group(1)), block["text"][match.end() :]))
    return pages
