"""The classes a run uses, from its settings: ``CLASSES_FILE`` (read once, at the entrypoint, into
``classes_text`` so that workers never read files) and ``SPLIT_MODE``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from raybatch.classes.load import default_classes, effective, parse_classes, read_classes_text
from raybatch.classes.model import ClassesFile

if TYPE_CHECKING:
    from raybatch.settings import RequestSettings


def read_classes_setting(classes_file: str | None) -> str | None:
    """The text of the file ``CLASSES_FILE`` names, checked (None when unset)."""
    if not classes_file:
        return None
    text = read_classes_text(classes_file)
    parse_classes(text, classes_file)  # refuse a broken file at the entrypoint, exit 2
    return text


def classes_of(request: RequestSettings) -> ClassesFile:
    """The classes these settings name: their file (or the default), ``SPLIT_MODE`` applied."""
    text, name = request.classes_text, request.classes_file or "classes file"
    classes = parse_classes(text, name) if text else default_classes()
    return effective(classes, request.split_mode)
