"""Oracle: chunk answers made from the sample corpus's truth → JSON → parse → stitch == the truth."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from raybatch.claude.emulator.rules import answer_from_truth
from raybatch.samples import Truth, TruthBundle, write_samples
from raybatch.steps.chunk import plan_chunks
from raybatch.steps.parse import read_answer
from raybatch.steps.stitch import StitchedDocument, stitch

KEY_FIELDS = ("title", "date", "number", "counterparty", "amount", "currency", "reference")


@pytest.fixture(scope="module")
def truth(tmp_path_factory: pytest.TempPathFactory) -> Truth:
    out: Path = tmp_path_factory.mktemp("samples")
    return Truth.model_validate(write_samples(out, bundles=6, seed=7))


def expected(bundle: TruthBundle) -> list[tuple[Any, ...]]:
    rotation = {info.page: info.rotation for info in bundle.page_info}
    return [
        (doc.first_page, doc.last_page, doc.type, *(getattr(doc, name) for name in KEY_FIELDS),
         {p: rotation[p] for p in range(doc.first_page, doc.last_page + 1)})
        for doc in bundle.documents
    ]  # fmt: skip


def found(documents: list[StitchedDocument]) -> list[tuple[Any, ...]]:
    return [
        (
            doc.first_page,
            doc.last_page,
            doc.type,
            *(getattr(doc, name) for name in KEY_FIELDS),
            dict(doc.rotations),
        )
        for doc in documents
    ]


def answers_through_json(bundle: TruthBundle, wrap: str) -> list[tuple[int, Any]]:
    answers = []
    for chunk in plan_chunks(bundle.pages):
        text = answer_from_truth(bundle, list(chunk.pages)).model_dump_json()
        parsed = read_answer(wrap.format(text), first_page=chunk.first, last_page=chunk.last)
        assert parsed.repaired is (wrap != "{}")
        answers.append((chunk.n, parsed.answer))
    return answers


def test_the_corpus_exercises_chunk_borders(truth: Truth) -> None:
    crossing = [
        d for b in truth.bundles for d in b.documents if (d.first_page - 1) // 8 != (d.last_page - 1) // 8
    ]
    rotated = [p for b in truth.bundles for p in b.page_info if p.rotation]
    assert crossing and rotated  # otherwise the oracle below would prove little


@pytest.mark.parametrize("wrap", ["{}", "```json\n{}\n```", "Here it is: {}"])
def test_stitched_documents_equal_the_truth_for_every_bundle(truth: Truth, wrap: str) -> None:
    rng = random.Random(11)
    for bundle in truth.bundles:
        answers = answers_through_json(bundle, wrap)
        assert found(stitch(answers, pages=bundle.pages)) == expected(bundle), bundle.file
        rng.shuffle(answers)
        assert found(stitch(answers, pages=bundle.pages)) == expected(bundle), bundle.file
