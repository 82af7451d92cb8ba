"""Split modes: ``llm`` (Claude's boundaries), ``page`` (one document per page), ``file`` (one per
file), from the classes file or ``SPLIT_MODE``; and a repaired answer marks its documents."""

from __future__ import annotations

from raybatch.classes import SplitMode, default_classes, effective
from raybatch.classes.render import answer_spec
from raybatch.classes.settings import classes_of
from raybatch.claude.answer import ChunkAnswer, FoundDocument, PageRotation
from raybatch.settings import RequestSettings
from raybatch.steps.stitch import stitch


def _answer(
    docs: list[tuple[int, int, str]], *, last_continues: bool = False, repairs: list[str] | None = None
) -> ChunkAnswer:
    first, last = docs[0][0], docs[-1][1]
    return ChunkAnswer(
        first_continues_previous=False,
        last_continues_next=last_continues,
        documents=[FoundDocument(first_page=a, last_page=b, type=t, number=f"N{a}") for a, b, t in docs],
        pages=[PageRotation(page=p, rotation=0) for p in range(first, last + 1)],
        repairs=repairs or [],
    )


ANSWERS = [
    (0, _answer([(1, 3, "other"), (4, 8, "invoice")], repairs=["code fence"])),
    (1, _answer([(9, 10, "act")])),
]


def test_llm_keeps_the_answers_boundaries_and_marks_repaired_parts() -> None:
    docs = stitch(ANSWERS, 10, default_classes())
    assert [(d.first_page, d.last_page, d.type, d.repaired) for d in docs] == [
        (1, 3, "other", True),
        (4, 8, "invoice", True),
        (9, 10, "act", False),
    ]


def test_page_makes_every_page_a_document() -> None:
    docs = stitch(ANSWERS, 10, effective(default_classes(), "page"))
    assert [(d.first_page, d.last_page) for d in docs] == [(p, p) for p in range(1, 11)]
    assert [d.type for d in docs[:4]] == ["other", "other", "other", "invoice"]


def test_file_makes_the_whole_file_one_document() -> None:
    [doc] = stitch(ANSWERS, 10, effective(default_classes(), SplitMode.FILE))
    assert (doc.first_page, doc.last_page, doc.type, doc.number, doc.repaired) == (
        1,
        10,
        "invoice",
        "N1",
        True,
    )


def test_the_setting_overrides_the_file_and_changes_the_prompt() -> None:
    page = classes_of(RequestSettings(split_mode="page"))
    assert page.split is SplitMode.PAGE and classes_of(RequestSettings()).split is SplitMode.LLM
    prompts = {answer_spec(effective(default_classes(), mode)).system_prompt for mode in SplitMode}
    assert len(prompts) == 3
