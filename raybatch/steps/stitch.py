"""Stitch chunk answers into the documents of a whole source, across chunk borders.

In split mode ``llm``, at each border the last document of the chunk before (A) and the first of
the chunk after (B) are one document when both flags say so (A.last_continues_next and
B.first_continues_previous), two when neither does. When the flags disagree the fields decide:
they are one document when A and B have the same type and none of the classes file's boundary
fields (``stitch_by``, else ``group_by``; the default file: number and counterparty) conflict (a
conflict is both present and different, compared as grouping compares them: ignoring case,
punctuation, spaces, a leading "№"/"No." mark, legal forms and Cyrillic/Latin look-alikes);
otherwise two. Flags that point outside the source (before page 1, after the last page) are ignored.
In mode ``page`` every page is a document of its own; in mode ``file`` the whole source is one.

A merged document takes its type from the first part that is not ``other``, each field from the
first part where it is not null, the union of the parts' named fields (first value wins), and is
``repaired`` when any part came from a repaired answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from raybatch.classes import OTHER, ClassesFile, SplitMode, default_classes
from raybatch.claude.answer import ChunkAnswer, FoundDocument
from raybatch.models import DefaultFieldNames
from raybatch.steps.group import normalize_counterparty, normalize_reference


@dataclass(frozen=True)
class StitchedDocument(DefaultFieldNames):
    """One document of the whole source: its pages, type, values and each page's rotation."""

    first_page: int
    last_page: int
    type: str
    values: Mapping[str, Any] = field(default_factory=dict)  # the declared fields, as answered
    fields: Mapping[str, str] = field(default_factory=dict)  # other name/value pairs
    rotations: Mapping[int, int] = field(default_factory=dict)  # page → clockwise degrees
    repaired: bool = False  # some part came from an answer whose text needed repair

    @property
    def pages(self) -> range:
        return range(self.first_page, self.last_page + 1)


def stitch(
    answers: Sequence[tuple[int, ChunkAnswer]], pages: int, classes: ClassesFile | None = None
) -> list[StitchedDocument]:
    """Documents of a ``pages``-page source from its chunks' parsed answers ``(n, answer)``, any order."""
    classes = classes or default_classes()
    ordered = [answer for _, answer in sorted(answers, key=lambda item: item[0])]
    _check_cover(ordered, pages)
    documents: list[StitchedDocument] = []
    continues = False
    for answer in ordered:
        rotations = {entry.page: int(entry.rotation) for entry in answer.pages}
        for index, doc in enumerate(answer.documents):
            part = _from_found(doc, rotations, bool(answer.repairs))
            joins = (
                index == 0
                and documents
                and _joins(continues, answer.first_continues_previous, documents[-1], part, classes)
            )
            if joins:
                documents[-1] = _merge(documents[-1], part)
            else:
                documents.append(part)
        continues = answer.last_continues_next
    return _by_mode(documents, classes.split)


def same_document(
    before: StitchedDocument, after: StitchedDocument, classes: ClassesFile | None = None
) -> bool:
    """The tie-break when the flags disagree: same type, and no conflicting boundary field."""
    fields = (classes or default_classes()).boundary_fields
    return before.type == after.type and not any(
        _conflict(before.values.get(name), after.values.get(name)) for name in fields
    )


def _joins(
    last_continues: bool,
    first_continues: bool,
    before: StitchedDocument,
    after: StitchedDocument,
    classes: ClassesFile,
) -> bool:
    if last_continues == first_continues:
        return last_continues
    return same_document(before, after, classes)


def _conflict(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return False
    a, b = str(a), str(b)
    return normalize_reference(a) != normalize_reference(b) and normalize_counterparty(
        a
    ) != normalize_counterparty(b)


def _from_found(doc: FoundDocument, rotations: Mapping[int, int], repaired: bool) -> StitchedDocument:
    pages = range(doc.first_page, doc.last_page + 1)
    return StitchedDocument(
        first_page=doc.first_page,
        last_page=doc.last_page,
        type=str(doc.type),
        values=doc.values,
        fields=_named(doc),
        rotations={page: rotations.get(page, 0) for page in pages},
        repaired=repaired,
    )


def _named(doc: FoundDocument) -> dict[str, str]:
    named: dict[str, str] = {}
    for item in doc.fields:
        named.setdefault(item.name, item.value)
    return named


def _merge(before: StitchedDocument, after: StitchedDocument) -> StitchedDocument:
    doc_type = after.type if before.type == OTHER else before.type
    values = dict(before.values)
    for name, value in after.values.items():
        if values.get(name) is None:
            values[name] = value
    return replace(
        before,
        last_page=after.last_page,
        type=doc_type,
        values=values,
        fields={**before.fields, **{k: v for k, v in after.fields.items() if k not in before.fields}},
        rotations={**before.rotations, **after.rotations},
        repaired=before.repaired or after.repaired,
    )


def _by_mode(documents: list[StitchedDocument], mode: SplitMode) -> list[StitchedDocument]:
    """The documents as the split mode has them, whatever the answers said."""
    if mode is SplitMode.PAGE:
        return [
            replace(doc, first_page=page, last_page=page, rotations={page: doc.rotations.get(page, 0)})
            for doc in documents
            for page in doc.pages
        ]
    if mode is SplitMode.FILE and documents:
        whole = documents[0]
        for doc in documents[1:]:
            whole = _merge(whole, doc)
        return [whole]
    return documents


def _check_cover(ordered: list[ChunkAnswer], pages: int) -> None:
    """Chunks must tile pages 1..pages in order; anything else is a caller's bug."""
    expected = 1
    for answer in ordered:
        if not answer.documents or answer.documents[0].first_page != expected:
            raise ValueError(f"chunk answers do not tile the source: expected a chunk from page {expected}")
        expected = answer.documents[-1].last_page + 1
    if expected != pages + 1:
        raise ValueError(f"chunk answers cover pages 1-{expected - 1}, the source has {pages}")
