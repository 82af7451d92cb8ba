"""The emulator's doubt knobs: deterministic by custom_id, each making the answer wrong its own way."""

from __future__ import annotations

import json

import pytest

from raybatch.claude.answer import ChunkAnswer, DocType, FoundDocument, PageRotation
from raybatch.claude.emulator.config import Faults
from raybatch.claude.emulator.doubt import WRONG, doubt, doubt_faults, drawn
from raybatch.errors import ConfigError
from raybatch.models import DOCUMENT_FIELDS


def _doc(first: int, last: int, **more: object) -> FoundDocument:
    declared = dict.fromkeys(spec.name for spec in DOCUMENT_FIELDS)
    values = {
        "first_page": first,
        "last_page": last,
        "type": DocType.INVOICE,
        "fields": [],
        **declared,
        **more,
    }
    return FoundDocument.model_validate(values)


ANSWER = ChunkAnswer(
    first_continues_previous=False,
    last_continues_next=False,
    documents=[_doc(1, 3, amount=120.0, number="7"), _doc(4, 4)],
    pages=[PageRotation(page=p, rotation=0) for p in range(1, 5)],
).model_dump_json()


def _with(knob: str) -> ChunkAnswer:
    return ChunkAnswer.model_validate_json(
        doubt(ANSWER, "job_1_batch_0", Faults(**{f"{knob}_fraction": 1.0}))
    )


def test_no_knob_leaves_the_answer_as_it_was() -> None:
    assert doubt(ANSWER, "job_1_batch_0", Faults()) == ANSWER
    assert doubt("not json", "job_1_batch_0", Faults(wrong_class_fraction=1.0)) == "not json"


def test_draws_are_the_same_for_a_custom_id_and_near_the_fraction() -> None:
    ids = [f"job_{n}_batch_0" for n in range(2000)]
    hits = [drawn(i, "wrong_class", 0.1) for i in ids]
    assert hits == [drawn(i, "wrong_class", 0.1) for i in ids]
    assert 150 < sum(hits) < 250
    assert hits != [drawn(i, "wrong_field", 0.1) for i in ids]  # each knob draws apart


def test_each_knob_makes_the_answer_wrong_its_own_way() -> None:
    split = _with("wrong_split")
    assert [(d.first_page, d.last_page) for d in split.documents] == [(1, 1), (2, 3), (4, 4)]
    assert split.documents[0].confidence == WRONG
    assert _with("wrong_class").documents[0].type is not DocType.INVOICE
    assert _with("wrong_field").documents[0].amount == 1200.0
    assert {d.confidence for d in _with("low_confidence").documents} == {0.35}


def test_emulator_doubt_takes_only_the_doubt_knobs() -> None:
    assert doubt_faults(json.dumps({"wrong_class_fraction": 0.2})).wrong_class_fraction == 0.2
    assert doubt_faults(None) == Faults()
    with pytest.raises(ConfigError, match="not \\['latency'\\]"):
        doubt_faults(json.dumps({"latency": 1}))
