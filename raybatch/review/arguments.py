"""The command-line arguments of ``raybatch review`` and ``raybatch redo`` (light: parsing only)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from raybatch.flags import add_setting_flags
from raybatch.review import PAGE_SIZE


def add_review_parser(sub: Any, settings: Sequence[str], handler: Callable[..., int]) -> None:
    """``raybatch review`` and its actions."""
    command = sub.add_parser("review", help="the review queue; correct documents (DOC is JOB:INDEX)")
    actions = command.add_subparsers(dest="review_command", required=True)
    queue = actions.add_parser("list", help="documents waiting for a person")
    queue.add_argument("--class", dest="doc_class", metavar="C", help="of this class only")
    queue.add_argument(
        "--reason", metavar="R", help="with this reason code (model, ocr, required, border, ...)"
    )
    queue.add_argument(
        "--limit", type=int, default=PAGE_SIZE, metavar="N", help=f"at most N documents (default {PAGE_SIZE})"
    )
    queue.add_argument("--after", metavar="JOB:INDEX", help="the page after this document (the next cursor)")
    export = actions.add_parser("export", help="write the reviewed documents as a truth.json")
    export.add_argument("file", help="the truth.json to write")
    show = actions.add_parser("show", help="a document, its previous versions and corrections")
    show.add_argument("doc", help="the document, JOB:INDEX (as status --jobs and the manifest show it)")
    corrections = {
        "accept": "the document is right as it is",
        "set": "change its class and/or fields",
        "split": "split it in two at a source page",
        "merge": "merge it with the next document of its job",
        "move": "move its first page (its boundary with the document before)",
    }
    for name, text in corrections.items():
        action = actions.add_parser(name, help=text)
        action.add_argument("doc", help="the document, JOB:INDEX")
        action.add_argument("--reviewer", metavar="NAME", help="who corrects (default: the OS user)")
        action.add_argument(
            "--version", type=int, help="the version you corrected from (default: the current)"
        )
        if name == "set":
            action.add_argument("--type", metavar="CLASS", help="the document's class")
            action.add_argument(
                "--field", action="append", metavar="NAME=VALUE", help="a field; again for more"
            )
        if name in ("split", "move"):
            action.add_argument("--at", type=int, required=True, metavar="PAGE", help="the source page")
    for action in (queue, export, show, *(actions.choices[name] for name in corrections)):
        add_setting_flags(action, settings)
        action.add_argument("--json", action="store_true", help="print one JSON object")
        action.set_defaults(handler=handler)


def add_redo_parser(sub: Any, settings: Sequence[str], handler: Callable[..., int]) -> None:
    """``raybatch redo JOB[:INDEX] [--fresh]``."""
    redo = sub.add_parser("redo", help="ask Claude again for a job (JOB) or one document (JOB:INDEX)")
    redo.add_argument("target", metavar="JOB[:INDEX]", help="a job, or one document of it")
    redo.add_argument("--fresh", action="store_true", help="past the answer cache: always a new request")
    redo.add_argument("--quiet", action="store_true", help="no progress bars")
    add_setting_flags(redo, settings)
    redo.add_argument("--json", action="store_true", help="print one JSON object at the end")
    redo.set_defaults(handler=handler)
