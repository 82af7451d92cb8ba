"""Corrections as plans: a job's current documents and one correction in, the new versions out.

Pure. A plan says which documents get a new version (``drafts``, object keys not yet set), which
indexes go (a merge), and the version each touched index must still be at (``expected``: None for an
index that must not exist yet): the ledger applies it in one transaction or raises a conflict.

    accept   the document as it is                       → its next version, review ``accepted``
    set      its class and/or fields                     → its next version, review ``corrected``
    split    at PAGE, the source page that starts part 2 → two documents; the later ones move up one
    merge    with the next document of its job           → one document; the later ones move down one
    move     its first page to PAGE (the boundary with the document before it) → both change
    redo     a new answer for some pages (``redo_plan``) → its documents there, the rest kept

A corrected document is scored 1.0 with no reasons: a person vouched for it. Documents that only
move to another index keep their state and score, as a new version at their new index.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from raybatch.errors import ConfigError
from raybatch.models import DOCUMENT_FIELDS, Correction, DocumentRecord, ReviewState

_SCALARS = {spec.name: spec for spec in DOCUMENT_FIELDS}


class CorrectionKind(StrEnum):
    """What a reviewer does to a document."""

    ACCEPT = "accept"
    SET = "set"
    SPLIT = "split"
    MERGE = "merge"
    MOVE = "move"


@dataclass(frozen=True)
class Plan:
    """The documents a correction writes, the indexes it removes, the versions it expects."""

    drafts: list[DocumentRecord]
    removed: list[int] = field(default_factory=list)
    expected: dict[int, int | None] = field(default_factory=dict)


def correction_key(job_id: int, index: int, base_version: int, kind: str, change: Mapping[str, Any]) -> str:
    """The idempotency key of a correction: the same change to the same version is the same key."""
    text = json.dumps([job_id, index, base_version, kind, change], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:40]


def plan_correction(
    documents: Sequence[DocumentRecord],
    index: int,
    kind: CorrectionKind,
    change: Mapping[str, Any],
    highest: Mapping[int, int],
) -> Plan:
    """The plan of one correction to document ``index`` of a job whose current documents are
    ``documents`` (index order); ``highest`` is each index's highest version so far."""
    docs = sorted(documents, key=lambda doc: doc.index)
    position = next((i for i, doc in enumerate(docs) if doc.index == index), None)
    if position is None:
        raise ConfigError(f"no document {index} in this job")
    planners = {
        CorrectionKind.ACCEPT: _accept,
        CorrectionKind.SET: _set,
        CorrectionKind.SPLIT: _split,
        CorrectionKind.MERGE: _merge,
        CorrectionKind.MOVE: _move,
    }
    layout, start = planners[CorrectionKind(kind)](docs, position, change)
    return _renumber(docs, layout, start, highest)


def _accept(
    docs: list[DocumentRecord], at: int, change: Mapping[str, Any]
) -> tuple[list[DocumentRecord], int]:
    return [*docs[:at], replace(docs[at], review=ReviewState.ACCEPTED.value), *docs[at + 1 :]], at


def _set(docs: list[DocumentRecord], at: int, change: Mapping[str, Any]) -> tuple[list[DocumentRecord], int]:
    doc = docs[at]
    doc_type = change.get("doc_type") or doc.doc_type
    scalars = dict(doc.values)
    named = dict(doc.fields)
    for name, value in (change.get("fields") or {}).items():
        if name in _SCALARS or name in scalars:
            scalars[name] = _scalar(name, value) if name in _SCALARS else value
        elif value in (None, ""):
            named.pop(name, None)
        else:
            named[name] = str(value)
    return [
        *docs[:at],
        _vouched(replace(doc, doc_type=doc_type, fields=named, values=scalars, problems=())),
        *docs[at + 1 :],
    ], at


def _split(
    docs: list[DocumentRecord], at: int, change: Mapping[str, Any]
) -> tuple[list[DocumentRecord], int]:
    doc, page = docs[at], int(change["at"])
    if not doc.first_page < page <= doc.last_page:
        raise ConfigError(f"split at page {page}: the document has pages {doc.first_page}-{doc.last_page}")
    before = _vouched(replace(doc, last_page=page - 1))
    unknown: dict[str, Any] = dict.fromkeys(doc.values)  # part 2's fields: for the reviewer to set
    after = _vouched(replace(doc, first_page=page, fields={}, group_key=None, values=unknown, problems=()))
    return [*docs[:at], before, after, *docs[at + 1 :]], at


def _merge(
    docs: list[DocumentRecord], at: int, change: Mapping[str, Any]
) -> tuple[list[DocumentRecord], int]:
    if at + 1 >= len(docs):
        raise ConfigError("merge: this is the last document of its job; there is no next one")
    first, second = docs[at], docs[at + 1]
    later = second.values
    scalars = {name: later.get(name) if value is None else value for name, value in first.values.items()}
    fields = {**second.fields, **first.fields}
    merged = _vouched(replace(first, last_page=second.last_page, fields=fields, values=scalars))
    return [*docs[:at], merged, *docs[at + 2 :]], at


def _move(docs: list[DocumentRecord], at: int, change: Mapping[str, Any]) -> tuple[list[DocumentRecord], int]:
    if at == 0:
        raise ConfigError("move: the first document of a job starts at page 1; split it instead")
    before, doc, page = docs[at - 1], docs[at], int(change["at"])
    if not before.first_page < page <= doc.last_page:
        raise ConfigError(
            f"move to page {page}: it must lie in pages {before.first_page + 1}-{doc.last_page}"
        )
    moved = [_vouched(replace(before, last_page=page - 1)), _vouched(replace(doc, first_page=page))]
    return [*docs[: at - 1], *moved, *docs[at + 1 :]], at - 1


def _renumber(
    docs: list[DocumentRecord], layout: list[DocumentRecord], start: int, highest: Mapping[int, int]
) -> Plan:
    """New versions for every index from ``start`` whose document changed or moved."""
    current = {doc.index: doc for doc in docs}
    drafts = []
    for slot, doc in enumerate(layout):
        if slot < start or current.get(slot) is doc:  # the same document at the same index
            continue
        version = max(highest.get(slot, 0), current[slot].version if slot in current else 0) + 1
        drafts.append(replace(doc, index=slot, version=version, pdf_key=None, thumb_key=None))
    removed = [doc.index for doc in docs if doc.index >= len(layout)]
    touched = {d.index for d in drafts} | set(removed)
    expected = {slot: current[slot].version if slot in current else None for slot in sorted(touched)}
    return Plan(drafts, removed, expected)


def _vouched(doc: DocumentRecord) -> DocumentRecord:
    """A document a person corrected: sure, nothing to doubt, review ``corrected``."""
    return replace(
        doc,
        confidence=1.0,
        review=ReviewState.CORRECTED.value,
        review_reasons=[],
        field_confidence=dict.fromkeys(doc.field_confidence, 1.0),
    )


def _scalar(name: str, value: Any) -> Any:
    if value in (None, ""):
        return None
    if _SCALARS[name].kind is float:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"field {name} takes a number, not {value!r}") from None
    return str(value)


def redo_region(message: str | None) -> tuple[int, int] | None:
    """The pages ``raybatch redo`` asked again for, as its job's error_message says them
    (``pages A-B``); None: the whole job."""
    match = re.fullmatch(r"pages (\d+)-(\d+)", message or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def redo_plan(
    current: Sequence[DocumentRecord],
    answered: Sequence[DocumentRecord],
    region: tuple[int, int] | None,
    highest: Mapping[int, int],
) -> Plan:
    """The new answer's documents (``answered``, tiling the source) in place of the current ones
    over ``region`` — widened until both tilings have a boundary at its ends — and the current
    documents elsewhere kept as they are (reviewed ones included)."""
    docs = sorted(current, key=lambda doc: doc.index)
    if region is None or not docs:
        return _renumber(docs, list(answered), 0, highest)
    first, last = region
    while True:
        touching = [d for d in (*docs, *answered) if d.first_page <= last and first <= d.last_page]
        wider = (min(d.first_page for d in touching), max(d.last_page for d in touching))
        if wider == (first, last):
            break
        first, last = wider
    inside = [d for d in answered if first <= d.first_page <= last]
    layout = [d for d in docs if d.last_page < first] + inside + [d for d in docs if d.first_page > last]
    return _renumber(docs, layout, 0, highest)


def redo_correction(
    job_id: int, current: Sequence[DocumentRecord], answers_digest: str, *, fresh: bool
) -> Correction:
    """The ledger row of a redo: by ``redo``, keyed by the answers it wrote (the same answer
    written again is the same correction)."""
    base = min((doc.version for doc in current if doc.index == 0), default=0)
    change = {"fresh": fresh, "answers": answers_digest}
    return Correction(job_id, 0, base, "redo", "redo", change, f"redo-{job_id}-{answers_digest}")
