"""Parse: valid answers, near-JSON repaired once, page checks, and messages without page text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from raybatch.claude.answer import ChunkAnswer
from raybatch.errors import UnparseableAnswer
from raybatch.steps.parse import parse_answer, read_answer

SECRET = "Ромашка-секрет"


def doc(first: int, last: int, **kw: Any) -> dict[str, Any]:
    base = {
        "first_page": first, "last_page": last, "type": "invoice", "title": "Счёт", "date": None,
        "number": "17", "counterparty": SECRET, "amount": 10.5, "currency": "RUB", "reference": None,
        "fields": [],
    }  # fmt: skip
    return {**base, **kw}


def answer(
    docs: list[dict[str, Any]], pages: list[tuple[int, int]] | None = None, **kw: Any
) -> dict[str, Any]:
    rotations = [{"page": p, "rotation": r} for p, r in (pages or [])]
    return {"first_continues_previous": False, "last_continues_next": False, "documents": docs,
            "pages": rotations, **kw}  # fmt: skip


VALID = answer([doc(9, 11), doc(12, 16, type="act")], [(p, 90 if p == 10 else 0) for p in range(9, 17)])


def test_valid_json_needs_no_repair() -> None:
    parsed = read_answer(json.dumps(VALID, ensure_ascii=False), first_page=9, last_page=16)
    assert not parsed.repaired and parsed.repairs == ()
    assert isinstance(parsed.answer, ChunkAnswer)
    assert [(d.first_page, d.last_page) for d in parsed.answer.documents] == [(9, 11), (12, 16)]
    assert parsed.answer.pages[1].rotation == 90


def test_missing_rotations_are_zero_and_documents_are_sorted() -> None:
    shuffled = answer([doc(12, 16), doc(9, 11)], [(16, 180)])
    result = parse_answer(json.dumps(shuffled), first_page=9, last_page=16)
    assert [(d.first_page, d.last_page) for d in result.documents] == [(9, 11), (12, 16)]
    assert [(p.page, p.rotation) for p in result.pages] == [(p, 180 if p == 16 else 0) for p in range(9, 17)]


PRETTY = json.dumps(VALID, ensure_ascii=False, indent=2)


@pytest.mark.parametrize(
    ("text", "repairs"),
    [
        (f"```json\n{PRETTY}\n```", {"code fence"}),
        (f"Here is the answer:\n{PRETTY}\nHope that helps!", {"prose before", "prose after"}),
        (PRETTY.replace('"fields": []', '"fields": [],').replace("\n  ]", ",\n  ]"), {"trailing comma"}),
        (repr(json.loads(PRETTY)), {"single quotes", "python literals"}),
        (PRETTY.rstrip("}\n "), {"truncated tail closed"}),
        (PRETTY[: PRETTY.rindex("]")].rstrip() + ",", {"truncated tail closed", "trailing comma"}),
    ],
)
def test_near_json_is_repaired_once(text: str, repairs: set[str]) -> None:
    parsed = read_answer(text, first_page=9, last_page=16)
    assert parsed.repaired and set(parsed.repairs) == repairs
    assert parsed.answer.repairs == list(parsed.repairs)  # the answer is marked as repaired
    unmarked = parsed.answer.model_copy(update={"repairs": []})
    assert unmarked == parse_answer(json.dumps(VALID), first_page=9, last_page=16)


def test_a_value_of_the_wrong_type_or_class_is_kept_for_the_writer_to_check() -> None:
    """Values and classes are checked against the classes file when written, never fail a parse."""
    data = answer([doc(9, 16, counterparty=["x"], type="memo")])
    [found] = parse_answer(json.dumps(data), first_page=9, last_page=16).documents
    assert (found.type, found.values["counterparty"]) == ("memo", ["x"])


def test_single_quotes_keep_apostrophes_and_double_quotes() -> None:
    data = answer([doc(1, 1, title='O\'Brien "Ltd"')])
    text = repr(data)  # Python writes the title in double quotes, escaping nothing
    assert read_answer(text, first_page=1, last_page=1).answer.documents[0].title == 'O\'Brien "Ltd"'
    text = text.replace('"O\'Brien \\"Ltd\\""', "'O\\'Brien \"Ltd\"'")
    assert read_answer(text, first_page=1, last_page=1).answer.documents[0].title == 'O\'Brien "Ltd"'


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I cannot help with that.",
        PRETTY[: PRETTY.index(SECRET) + 3],  # cut inside a string: closing it would invent a value
        PRETTY[: PRETTY.index('"amount": 10.5') + len('"amount": 10')],  # cut right after a bare number
        PRETTY[: PRETTY.index('"date"') + len('"date"')],  # a key without its value
        '{"documents": [}',
        "{'a': 1} ]",
    ],
)
def test_hopeless_text_is_unparseable_without_quoting_it(text: str) -> None:
    with pytest.raises(UnparseableAnswer) as caught:
        parse_answer(text, first_page=9, last_page=16)
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (answer([doc(9, 16, type=["memo"])]), "documents.0.type: string_type"),
        ({**answer([doc(9, 16)]), "extra": SECRET}, "extra: extra_forbidden"),
        (answer([doc(9, 16)], [(9, 45)]), "rotation"),
        (answer([]), "no documents"),
        (answer([doc(9, 12), doc(14, 16)]), "leaves out pages"),
        (answer([doc(9, 12), doc(12, 16)]), "overlaps"),
        (answer([doc(10, 16)]), "leaves out pages"),
        (answer([doc(9, 15)]), "end at page 15"),
        (answer([doc(9, 17)]), "end at page 17"),
        (answer([doc(9, 12), doc(13, 12), doc(13, 16)]), "backwards"),
        (answer([doc(9, 16)], [(17, 0)]), "outside the chunk"),
        (answer([doc(9, 16)], [(9, 0), (9, 90)]), "two rotations"),
    ],
)
def test_semantic_and_model_errors(data: dict[str, Any], match: str) -> None:
    with pytest.raises(UnparseableAnswer, match=match) as caught:
        parse_answer(json.dumps(data, ensure_ascii=False), first_page=9, last_page=16)
    assert SECRET not in str(caught.value)


def test_a_repeated_identical_rotation_is_fine() -> None:
    result = parse_answer(json.dumps(answer([doc(1, 2)], [(2, 90), (2, 90)])), first_page=1, last_page=2)
    assert [(p.page, p.rotation) for p in result.pages] == [(1, 0), (2, 90)]
