"""Stitch: documents across chunk borders, by the flags and, when they disagree, by the fields."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raybatch.claude.answer import ChunkAnswer, DocType, FoundDocument, NamedField, PageRotation
from raybatch.steps.stitch import StitchedDocument, same_document, stitch


def found(first: int, last: int, type: DocType = DocType.INVOICE, number: str | None = "1",
          counterparty: str | None = "Acme", fields: dict[str, str] | None = None,
          title: str | None = None, amount: float | None = None) -> FoundDocument:  # fmt: skip
    return FoundDocument(
        first_page=first, last_page=last, type=type, title=title, date=None, number=number,
        counterparty=counterparty, amount=amount, currency=None, reference=None,
        fields=[NamedField(name=k, value=v) for k, v in (fields or {}).items()],
    )  # fmt: skip


def chunk(docs: list[FoundDocument], first: bool = False, last: bool = False,
          rotations: dict[int, int] | None = None) -> ChunkAnswer:  # fmt: skip
    pages = range(docs[0].first_page, docs[-1].last_page + 1)
    return ChunkAnswer(
        first_continues_previous=first, last_continues_next=last, documents=docs,
        pages=[PageRotation(page=p, rotation=(rotations or {}).get(p, 0)) for p in pages],  # type: ignore[arg-type]
    )  # fmt: skip


def spans(documents: list[StitchedDocument]) -> list[tuple[int, int]]:
    return [(d.first_page, d.last_page) for d in documents]


def test_both_flags_merge_and_fields_combine() -> None:
    a = chunk([found(1, 3), found(4, 8, number="7", fields={"vat": "1"}, title="Contract")], last=True,
              rotations={8: 90})  # fmt: skip
    b = chunk([found(9, 10, type=DocType.OTHER, number=None, fields={"vat": "2", "due": "x"}, amount=5.0),
               found(11, 12)], first=True, rotations={9: 180})  # fmt: skip
    docs = stitch([(1, b), (0, a)], pages=12)
    assert spans(docs) == [(1, 3), (4, 10), (11, 12)]
    merged = docs[1]
    assert (merged.type, merged.number, merged.title, merged.amount) == (
        DocType.INVOICE,
        "7",
        "Contract",
        5.0,
    )
    assert dict(merged.fields) == {"vat": "1", "due": "x"}
    assert dict(merged.rotations) == {4: 0, 5: 0, 6: 0, 7: 0, 8: 90, 9: 180, 10: 0}
    assert list(merged.pages) == list(range(4, 11))


def test_type_comes_from_the_first_part_that_is_not_other() -> None:
    a = chunk([found(1, 8, type=DocType.OTHER)], last=True)
    b = chunk([found(9, 9, type=DocType.CONTRACT)], first=True)
    assert stitch([(0, a), (1, b)], pages=9)[0].type == DocType.CONTRACT


def test_neither_flag_splits_even_identical_fields() -> None:
    docs = stitch([(0, chunk([found(1, 8)])), (1, chunk([found(9, 9)]))], pages=9)
    assert spans(docs) == [(1, 8), (9, 9)]


@pytest.mark.parametrize(
    ("after", "merged"),
    [
        (found(9, 9), True),
        (found(9, 9, number=None, counterparty=None), True),
        (found(9, 9, number="No. 1", counterparty="  ACME "), True),
        (found(9, 9, number="2"), False),
        (found(9, 9, counterparty="Other Ltd"), False),
        (found(9, 9, type=DocType.ACT), False),
    ],
)
@pytest.mark.parametrize(("last", "first"), [(True, False), (False, True)])
def test_disagreeing_flags_are_settled_by_the_fields(after: FoundDocument, merged: bool, last: bool,
                                                     first: bool) -> None:  # fmt: skip
    a = chunk([found(1, 8, number="№ 1", counterparty="ACME")], last=last)
    b = chunk([after], first=first)
    assert spans(stitch([(0, a), (1, b)], pages=9)) == ([(1, 9)] if merged else [(1, 8), (9, 9)])


def test_counterparty_punctuation_does_not_conflict() -> None:
    a = StitchedDocument(1, 1, DocType.ACT, values={"counterparty": "ООО «Ромашка»"})
    b = StitchedDocument(2, 2, DocType.ACT, values={"counterparty": 'ООО "Ромашка"'})
    assert same_document(a, b)
    assert not same_document(a, StitchedDocument(2, 2, DocType.ACT, values={"counterparty": "ООО «Лютик»"}))


def test_fields_are_compared_as_grouping_compares_them() -> None:
    a = StitchedDocument(
        1, 1, DocType.ACT, values={"number": "АСТ-24-7", "counterparty": "ООО «Ромашка»"}
    )  # Cyrillic
    b = StitchedDocument(2, 2, DocType.ACT, values={"number": "No ACT-24-7", "counterparty": "Ромашка"})
    assert same_document(a, b)
    assert not same_document(a, StitchedDocument(2, 2, DocType.ACT, values={"number": "ACT-24-8"}))


def test_a_document_through_three_chunks_and_flags_at_the_edges() -> None:
    answers = [
        (0, chunk([found(1, 8)], first=True, last=True)),
        (1, chunk([found(9, 16, number=None)], first=True, last=True)),
        (2, chunk([found(17, 18), found(19, 19, number="2")], first=True, last=True)),
    ]
    random.Random(3).shuffle(answers)
    assert spans(stitch(answers, pages=19)) == [(1, 18), (19, 19)]


@pytest.mark.parametrize(
    ("answers", "pages"),
    [
        ([(0, chunk([found(1, 8)])), (2, chunk([found(17, 20)]))], 20),
        ([(0, chunk([found(1, 8)])), (1, chunk([found(8, 12)]))], 12),
        ([(0, chunk([found(1, 8)]))], 9),
        ([], 1),
    ],
)
def test_chunks_that_do_not_tile_the_source_are_a_bug(
    answers: list[tuple[int, ChunkAnswer]], pages: int
) -> None:
    with pytest.raises(ValueError, match=r"cover|tile"):
        stitch(answers, pages=pages)


# ---- property: random layouts → chunk answers derived from them → stitch gives the layout back


@dataclass(frozen=True)
class TrueDoc:
    first: int
    last: int
    type: DocType
    number: str
    counterparty: str


@st.composite
def layouts(draw: st.DrawFn) -> tuple[list[TrueDoc], dict[int, int]]:
    lengths = draw(st.lists(st.integers(1, 15), min_size=1, max_size=10))
    docs, start = [], 1
    for index, length in enumerate(lengths):
        kind = draw(st.sampled_from(list(DocType)))
        party = draw(st.sampled_from(["Acme", "ООО «Ромашка»", "Globex"]))
        docs.append(TrueDoc(start, start + length - 1, kind, f"N-{index}", party))
        start += length
    rotations = {p: draw(st.sampled_from([0, 90, 180, 270])) for p in range(1, start)}
    return docs, rotations


def chunk_answers(
    docs: list[TrueDoc], rotations: dict[int, int], size: int = 8
) -> list[tuple[int, ChunkAnswer]]:
    pages = docs[-1].last
    answers = []
    for n, first in enumerate(range(1, pages + 1, size)):
        last = min(first + size - 1, pages)
        parts = [d for d in docs if d.last >= first and d.first <= last]
        answer = ChunkAnswer(
            first_continues_previous=parts[0].first < first,
            last_continues_next=parts[-1].last > last,
            documents=[
                found(max(d.first, first), min(d.last, last), d.type, d.number, d.counterparty) for d in parts
            ],
            pages=[PageRotation(page=p, rotation=rotations[p]) for p in range(first, last + 1)],  # type: ignore[arg-type]
        )
        answers.append((n, answer))
    return answers


def as_truth(docs: list[TrueDoc], rotations: dict[int, int]) -> list[tuple]:
    return [(d.first, d.last, d.type, d.number, d.counterparty,
             {p: rotations[p] for p in range(d.first, d.last + 1)}) for d in docs]  # fmt: skip


def as_found(docs: list[StitchedDocument]) -> list[tuple]:
    return [(d.first_page, d.last_page, d.type, d.number, d.counterparty, dict(d.rotations)) for d in docs]


@settings(max_examples=100, deadline=None)
@given(layouts(), st.randoms(use_true_random=False))
def test_stitch_gives_back_the_layout(
    layout: tuple[list[TrueDoc], dict[int, int]], rng: random.Random
) -> None:
    docs, rotations = layout
    answers = chunk_answers(docs, rotations)
    rng.shuffle(answers)
    assert as_found(stitch(answers, pages=docs[-1].last)) == as_truth(docs, rotations)


@settings(max_examples=100, deadline=None)
@given(layouts(), st.randoms(use_true_random=False))
def test_one_wrong_flag_per_border_is_overruled_by_the_fields(
    layout: tuple[list[TrueDoc], dict[int, int]], rng: random.Random
) -> None:
    docs, rotations = layout
    answers = chunk_answers(docs, rotations)
    for index in range(len(answers) - 1):  # at each border, flip one of its two flags
        (n, before), (m, after) = answers[index], answers[index + 1]
        if rng.random() < 0.5:
            answers[index] = (
                n,
                before.model_copy(update={"last_continues_next": not before.last_continues_next}),
            )
        else:
            flipped = not after.first_continues_previous
            answers[index + 1] = (m, after.model_copy(update={"first_continues_previous": flipped}))
    assert as_found(stitch(answers, pages=docs[-1].last)) == as_truth(docs, rotations)
