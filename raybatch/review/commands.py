"""What ``raybatch review`` and ``raybatch eval --reviewed`` do, given built settings: thin over
``ReviewDesk`` (the API the console calls too), printing a line, a table or one JSON object."""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.table import Table

from raybatch import terminal as out
from raybatch.errors import ConfigError
from raybatch.models import DocumentRecord
from raybatch.review.api import Applied, DocRef, PendingPage, ReviewDesk, Reviewer
from raybatch.review.truth import evaluate_reviewed, reviewed_truth
from raybatch.settings import Settings


def run_review(settings: Settings, args: argparse.Namespace) -> int:
    """One ``raybatch review`` action, as parsed into ``args``."""
    desk = ReviewDesk.open(settings)
    action = args.review_command
    if action == "list":
        after = DocRef.parse(args.after) if args.after else None
        page = desk.pending(doc_type=args.doc_class, reason=args.reason, after=after, limit=args.limit)
        out.show(queue_entry(page), _queue_table, as_json=args.json)
        if page.next is not None and not args.json:
            print(f"{page.more} more wait: {_next_command(page.next, args)}")
        return 0
    if action == "export":
        truth = reviewed_truth(desk.state)
        Path(args.file).write_text(json.dumps(truth, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {len(truth['bundles'])} reviewed bundles to {args.file}")
        return 0
    ref = DocRef.parse(args.doc)
    if action == "show":
        story = desk.show(ref)
        shown = {
            "document": document_entry(story.document),
            "versions": [document_entry(v.record) for v in story.versions],
            "corrections": [
                asdict(c) for c in story.corrections if ref.index in _indexes(c.written, c.index)
            ],
        }
        out.print_json(shown) if args.json else out.console.print_json(json.dumps(shown, default=str))
        return 0
    return _report(_correct(desk, ref, args), as_json=args.json)


def _correct(desk: ReviewDesk, ref: DocRef, args: argparse.Namespace) -> Applied:
    who = Reviewer(args.reviewer) if args.reviewer else Reviewer.default()
    expected = args.version
    if args.review_command == "accept":
        return desk.accept(ref, who, expected_version=expected)
    if args.review_command == "set":
        fields = dict(_field(text) for text in args.field or [])
        return desk.set(ref, who, doc_type=args.type, fields=fields, expected_version=expected)
    if args.review_command == "split":
        return desk.split(ref, args.at, who, expected_version=expected)
    if args.review_command == "move":
        return desk.move(ref, args.at, who, expected_version=expected)
    return desk.merge(ref, who, expected_version=expected)


def run_eval_reviewed(settings: Settings, *, as_json: bool = False) -> int:
    """``raybatch eval --reviewed``: the model's answers scored against the reviewed versions."""
    figures = evaluate_reviewed(ReviewDesk.open(settings).state)
    out.show(figures, out.evaluation_table, as_json=as_json)
    if not as_json:
        print(
            f"{figures['jobs_reviewed']} reviewed jobs, {figures['corrections']} corrections; "
            f"field accuracy {figures['field_accuracy']:.3f}"
        )
    return 0


def document_entry(doc: DocumentRecord) -> dict[str, Any]:
    """A document as ``review list --json`` and ``review show`` print it."""
    entry = asdict(doc)
    entry["doc"] = f"{doc.job_id}:{doc.index}"
    return entry


def queue_entry(page: PendingPage) -> dict[str, Any]:
    """A page of the queue as ``review list --json`` prints it: ``next`` is null at the end."""
    documents = [document_entry(d) for d in page.documents]
    return {"documents": documents, "more": page.more, "next": str(page.next) if page.next else None}


def _next_command(after: DocRef, args: argparse.Namespace) -> str:
    """The ``review list`` that shows the next page (the same filters; --db and --store as given)."""
    words = ["raybatch review list", f"--after {after}", f"--limit {args.limit}"]
    words += [f"--class {shlex.quote(args.doc_class)}"] if args.doc_class else []
    words += [f"--reason {shlex.quote(args.reason)}"] if args.reason else []
    return " ".join(words)


def _report(applied: Applied, *, as_json: bool) -> int:
    written = [f"{d.job_id}:{d.index} v{d.version}" for d in applied.documents]
    if as_json:
        out.print_json(
            {"applied": applied.applied, "correction": asdict(applied.correction), "written": written}
        )
        return 0
    what = "applied" if applied.applied else "already applied (nothing changed)"
    done = applied.correction
    print(f"correction {done.id} ({done.kind}) {what}: {', '.join(written) or 'none'}")
    return 0


def _field(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise ConfigError(f"--field {text!r}: write NAME=VALUE (an empty VALUE clears the field)")
    return name.strip(), value


def _indexes(written: Sequence[tuple[int, int]], index: int) -> set[int]:
    return {index, *(i for i, _ in written)}


def _queue_table(page: dict[str, Any]) -> Table:
    entries = page["documents"]
    more = f" ({page['more']} more)" if page["more"] else ""
    table = Table(title=f"review: {len(entries)} documents pending{more}", show_header=True)
    for column in ("doc", "class", "pages", "score", "reasons"):
        table.add_column(column)
    for e in entries:
        pages = f"{e['first_page']}-{e['last_page']}"
        score = "" if e["confidence"] is None else f"{e['confidence']:.2f}"
        table.add_row(e["doc"], e["doc_type"], pages, score, "; ".join(e["review_reasons"]))
    return table
