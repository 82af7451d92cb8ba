"""The signals of today's answers: what each stitched document's parts said, and where they disagree.

Reads the chunk answers (``ChunkAnswer``) and the stitched documents, never changes them. A border
between two chunks raises a doubt on the documents on either side of it when the continuation
flags disagree (stitching had to decide), and on a merged document when its parts give different
values for one field. The model's confidence of a stitched document is its parts' lowest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from raybatch.claude.answer import ChunkAnswer, FoundDocument
from raybatch.models import DOCUMENT_FIELDS
from raybatch.review.confidence import FieldSpec
from raybatch.steps.stitch import StitchedDocument

# Today's declared fields as JSON Schema would say them (the classes file gives its own).
TODAY_SPECS: Mapping[str, FieldSpec] = {
    spec.name: FieldSpec(
        type="number" if spec.kind is float else "string",
        format="date" if spec.name == "date" else None,
    )
    for spec in DOCUMENT_FIELDS
}


@dataclass
class PartSignals:
    """What the parts of one stitched document said: the model's confidence and border doubts."""

    model_confidence: float | None = None
    border: list[str] = field(default_factory=list)
    border_fields: list[str] = field(default_factory=list)


def part_signals(
    answers: Sequence[tuple[int, ChunkAnswer]], stitched: Sequence[StitchedDocument]
) -> list[PartSignals]:
    """One ``PartSignals`` per stitched document, in order."""
    ordered = [answer for _, answer in sorted(answers, key=lambda item: item[0])]
    found = [PartSignals() for _ in stitched]
    parts: list[list[FoundDocument]] = [[] for _ in stitched]
    for answer in ordered:
        for doc in answer.documents:
            parts[_holding(stitched, doc.first_page)].append(doc)
    for index, members in enumerate(parts):
        found[index].model_confidence = _lowest(d.confidence for d in members)
        found[index].border_fields = _conflicts(members)
        found[index].border.extend(f"merged parts disagree on {name}" for name in found[index].border_fields)
    for before, after in pairwise(ordered):
        if before.last_continues_next != after.first_continues_previous:
            page = after.documents[0].first_page
            for index in {_holding(stitched, page - 1), _holding(stitched, page)}:
                found[index].border.append(f"continuation flags disagree at page {page}")
    return found


def _holding(stitched: Sequence[StitchedDocument], page: int) -> int:
    for index, doc in enumerate(stitched):
        if doc.first_page <= page <= doc.last_page:
            return index
    raise ValueError(f"no stitched document holds page {page}")


def _lowest(values: object) -> float | None:
    known = [float(v) for v in values if v is not None]  # type: ignore[attr-defined]
    return min(known) if known else None


def _conflicts(members: Sequence[FoundDocument]) -> list[str]:
    if len(members) < 2:
        return []
    conflicting = []
    names = sorted({name for doc in members for name in doc.values})
    for name in names:
        given = {_skeleton(doc.values[name]) for doc in members if doc.values.get(name) is not None}
        if len(given) > 1:
            conflicting.append(name)
    return conflicting


def _skeleton(value: object) -> str:
    return " ".join(str(value).lower().split())
