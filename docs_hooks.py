"""MkDocs hook: the CLI and settings references are made from the code at build time."""

from __future__ import annotations

from typing import Any

MARKERS = {
    "<!-- generated: cli -->": lambda: _cli(),
    "<!-- generated: settings -->": lambda: _settings(),
}


def _cli() -> str:
    from raybatch.cli import _parser
    from raybatch.reference import cli_markdown

    return cli_markdown(_parser())


def _settings() -> str:
    from raybatch.reference import settings_markdown

    return settings_markdown()


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replace each marker with its generated reference."""
    for marker, make in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
