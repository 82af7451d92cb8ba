"""Stitch chunk answers into the documents of a whole source, across chunk borders.

At each border the last document of the chunk before (A) and the first of the chunk after (B) are
one document when both flags say so (A.last_continues_next and B.first_continues_previous), two
when neither does. When the flags disagree the fields decide: they are one document when A and B
have the same type and neither their numbers nor their counterparties conflict (a conflict is both
present and different, compared as grouping compares them: ignoring case, punctuation, spaces, a
leading "№"/"No." mark, legal forms and Cyrillic/Latin look-alikes); otherwise two. Flags that
point outside the source (before page 1, after the last page) are ignored.

A merged document takes its type from the first part that is not ``other``, each scalar field from
the first part where it is not null, and the union of the parts' named fields (first value wins).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from raybatch.claude.answer import ChunkAnswer, DocType, FoundDocument
from raybatch.models import DocumentFields, field_values
from raybatch.steps.group import normalize_counterparty, normalize_reference


@dataclass(frozen=True)
class StitchedDocument(DocumentFields):
    """One document of the whole source: its pages, type, fields and each page's rotation."""

    first_page: int
    last_page: int
    type: DocType
    fields: Mapping[str, str] = field(default_factory=dict)
    rotations: Mapping[int, int] = field(default_factory=dict)  # page → clockwise degrees

    @property
    def pages(self) -> range:
        return range(self.first_page, self.last_page + 1)


def stitch(answers: Sequence[tuple[int, ChunkAnswer]], pages: int) -> list[StitchedDocument]:
    """Documents of a ``pages``-page source from its chunks' parsed answers ``(n, answer)``, any order."""
    ordered = [answer for _, answer in sorted(answers, key=lambda item: item[0])]
    _check_cover(ordered, pages)
    documents: list[StitchedDocument] = []
    continues = False
    for answer in ordered:
        rotations = {entry.page: int(entry.rotation) for entry in answer.pages}
        for index, doc in enumerate(answer.documents):
            part = _from_found(doc, rotations)
            if (
                index == 0
                and documents
                and _joins(continues, answer.first_continues_previous, documents[-1], part)
            ):
                documents[-1] = _merge(documents[-1], part)
            else:
                documents.append(part)
        continues = answer.last_continues_next
    return documents


def same_document(before: StitchedDocument, after: StitchedDocument) -> bool:
    """The tie-break when the flags disagree: same type, and no conflicting number or counterparty."""
    return before.type == after.type and not (
        _conflict(before.number, after.number, normalize_reference)
        or _conflict(before.counterparty, after.counterparty, normalize_counterparty)
    )


def _joins(
    last_continues: bool, first_continues: bool, before: StitchedDocument, after: StitchedDocument
) -> bool:
    if last_continues == first_continues:
        return last_continues
    return same_document(before, after)


def _conflict(a: str | None, b: str | None, skeleton: Callable[[str | None], str]) -> bool:
    return a is not None and b is not None and skeleton(a) != skeleton(b)


def _from_found(doc: FoundDocument, rotations: Mapping[int, int]) -> StitchedDocument:
    pages = range(doc.first_page, doc.last_page + 1)
    return StitchedDocument(
        first_page=doc.first_page,
        last_page=doc.last_page,
        type=doc.type,
        **field_values(doc),
        fields=_named(doc),
        rotations={page: rotations.get(page, 0) for page in pages},
    )


def _named(doc: FoundDocument) -> dict[str, str]:
    named: dict[str, str] = {}
    for item in doc.fields:
        named.setdefault(item.name, item.value)
    return named


def _merge(before: StitchedDocument, after: StitchedDocument) -> StitchedDocument:
    doc_type = after.type if before.type is DocType.OTHER else before.type
    later = field_values(after)
    scalars = {name: later[name] if value is None else value for name, value in field_values(before).items()}
    return replace(
        before,
        last_page=after.last_page,
        type=doc_type,
        fields={**before.fields, **{k: v for k, v in after.fields.items() if k not in before.fields}},
        rotations={**before.rotations, **after.rotations},
        **scalars,
    )


def _check_cover(ordered: list[ChunkAnswer], pages: int) -> None:
    """Chunks must tile pages 1..pages in order; anything else is a caller's bug."""
    expected = 1
    for answer in ordered:
        if not answer.documents or answer.documents[0].first_page != expected:
            raise ValueError(f"chunk answers do not tile the source: expected a chunk from page {expected}")
        expected = answer.documents[-1].last_page + 1
    if expected != pages + 1:
        raise ValueError(f"chunk answers cover pages 1-{expected - 1}, the source has {pages}")
