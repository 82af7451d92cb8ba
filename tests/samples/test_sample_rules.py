"""The rule-based model reads every 8-page chunk of the sample corpus; its answers stitch to the truth."""

from __future__ import annotations

from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from raybatch.claude.answer import ChunkAnswer, DocType
from raybatch.claude.emulator.rules import (
    answer_chunk,
    answer_from_truth,
    fold,
    near,
    parse_amount,
    parse_date,
)
from raybatch.samples import CorpusPlan, Truth, TruthBundle, add_ocr_noise
from raybatch.samples.plan import PlannedBundle

KEYS = (
    "first_page",
    "last_page",
    "type",
    "number",
    "date",
    "counterparty",
    "amount",
    "currency",
    "reference",
)


def page_texts(
    corpus_dir: Path, bundle: TruthBundle, planned: PlannedBundle, noisy: bool
) -> list[tuple[int, str]]:
    """The text layer of digital pages; for scans, the text printed on them (what a perfect OCR reads)."""
    texts = []
    with pymupdf.open(corpus_dir / bundle.file) as doc:
        for info, page in zip(bundle.page_info, planned.pages, strict=True):
            text = page.text if info.scanned else doc[info.page - 1].get_text()
            texts.append((info.page, add_ocr_noise(text, f"{bundle.file}:{info.page}") if noisy else text))
    return texts


def chunk_answers(texts: list[tuple[int, str]]) -> list[ChunkAnswer]:
    answers = [answer_chunk(texts[i : i + 8]) for i in range(0, len(texts), 8)]
    for answer, start in zip(answers, range(0, len(texts), 8), strict=True):
        assert ChunkAnswer.model_validate_json(answer.model_dump_json()) == answer
        assert [p.page for p in answer.pages] == [n for n, _ in texts[start : start + 8]]
    return answers


def stitch(answers: list[ChunkAnswer]) -> list[dict[str, Any]]:
    """Naive stitching: merge across a border when both sides say so; the first part's fields win."""
    docs: list[dict[str, Any]] = []
    carry = False
    for answer in answers:
        for i, found in enumerate(answer.documents):
            part = found.model_dump()
            if i == 0 and docs and carry and answer.first_continues_previous:
                merged = docs[-1]
                merged["last_page"] = part["last_page"]
                for key, value in part.items():
                    if merged.get(key) is None:
                        merged[key] = value
            else:
                docs.append(part)
        carry = answer.last_continues_next
    return docs


def similar(a: str | None, b: str) -> bool:
    squash = lambda s: fold(s).replace(" ", "")  # noqa: E731
    return a is not None and SequenceMatcher(None, squash(a), squash(b)).ratio() >= 0.85


@pytest.mark.parametrize("noisy", [False, True], ids=["clean", "ocr-noise"])
def test_rules_find_every_document_and_its_fields(
    corpus_dir: Path, truth: Truth, plan: CorpusPlan, noisy: bool
) -> None:
    for bundle, planned in zip(truth.bundles, plan.bundles, strict=True):
        found = stitch(chunk_answers(page_texts(corpus_dir, bundle, planned, noisy)))
        assert [(d["first_page"], d["last_page"]) for d in found] == [
            (d.first_page, d.last_page) for d in bundle.documents
        ], bundle.file
        for got, want in zip(found, bundle.documents, strict=True):
            expected = want.model_dump()
            exact = [k for k in KEYS if not (noisy and k == "counterparty")]
            assert {k: got[k] for k in exact} == {k: expected[k] for k in exact}, (bundle.file, want.index)
            if noisy:
                assert similar(got["counterparty"], want.counterparty), (bundle.file, want.index)
            else:
                assert got["title"] == want.title


def test_noise_really_changes_the_text(truth: Truth, plan: CorpusPlan) -> None:
    text = plan.bundles[0].pages[0].text
    noisy = add_ocr_noise(text, "x")
    assert noisy != text and noisy == add_ocr_noise(text, "x") and noisy != add_ocr_noise(text, "y")
    assert [c for c in noisy if c.isdigit()] == [c for c in text if c.isdigit()]


def test_oracle_answers_stitch_to_the_truth(truth: Truth) -> None:
    for bundle in truth.bundles:
        answers = [
            answer_from_truth(bundle, list(range(s, min(s + 8, bundle.pages + 1))))
            for s in range(1, bundle.pages + 1, 8)
        ]
        found = stitch(answers)
        expected = [d.model_dump() for d in bundle.documents]
        assert [{k: d[k] for k in (*KEYS, "title")} for d in found] == [
            {k: d[k] for k in (*KEYS, "title")} for d in expected
        ]
        rotations = {p.page: p.rotation for a in answers for p in a.pages}
        assert rotations == {i.page: i.rotation for i in bundle.page_info}


def test_oracle_accepts_the_truth_as_a_plain_mapping(truth: Truth) -> None:
    bundle = truth.bundles[0]
    assert answer_from_truth(bundle.model_dump(mode="json"), [1, 2, 3]) == answer_from_truth(
        bundle, [1, 2, 3]
    )


INVOICE_1 = (
    "ACME Ltd\nINVOICE No. INV-24-0001\nDate: 2024-03-05\nCounterparty: Foo LLC\nAmount: 1,234.50 USD\n"
)
LETTER_P2 = "Regarding invoice No. INV-24-0001: paid.\nThank you.\nLTR-24-0007 · Page 2 of 2"


def test_a_title_deep_in_a_letter_does_not_start_a_document() -> None:
    letter_p1 = (
        "ACME Ltd\nLETTER No. LTR-24-0007\nDate: 2024-03-06\nCounterparty: Foo LLC\nLTR-24-0007 · Page 1 of 2"
    )
    answer = answer_chunk([(1, letter_p1), (2, LETTER_P2)])
    assert [(d.first_page, d.last_page, d.type) for d in answer.documents] == [(1, 2, DocType.LETTER)]
    assert answer.documents[0].amount is None and not answer.last_continues_next


def test_pages_without_text_continue_the_current_document() -> None:
    answer = answer_chunk([(9, ""), (10, INVOICE_1 + "INV-24-0001 · Page 1 of 3"), (11, "   \n")])
    assert answer.first_continues_previous and answer.last_continues_next
    assert [(d.first_page, d.last_page) for d in answer.documents] == [(9, 9), (10, 11)]
    assert answer.documents[0].type == DocType.OTHER and answer.documents[0].number is None
    invoice = answer.documents[1]
    assert (invoice.type, invoice.number, invoice.date) == (DocType.INVOICE, "INV-24-0001", "2024-03-05")
    assert (invoice.counterparty, invoice.amount, invoice.currency) == ("Foo LLC", 1234.5, "USD")


def test_a_title_without_footer_starts_a_document_and_a_foreign_footer_splits() -> None:
    answer = answer_chunk(
        [(1, "x\nACT-24-0002 · Page 2 of 2"), (2, INVOICE_1), (3, "RCP-24-0009 · Стр. 2/2")]
    )
    assert [(d.first_page, d.last_page, d.type) for d in answer.documents] == [
        (1, 1, DocType.ACT), (2, 2, DocType.INVOICE), (3, 3, DocType.RECEIPT)
    ]  # fmt: skip
    assert answer.first_continues_previous and not answer.last_continues_next


def test_russian_pages_read_through_look_alikes_and_lost_spaces() -> None:
    page = (
        "ООО «Ромашка»\nСЧEТ НА ОПЛAТУ № INV-24-0003\nДaта:05.03.2024\n"  # Latin E and a in Cyrillic words
        "Контрагнт: ООО «Лес»\nСумма: 12 345,50 RUB\nINV-24-0003·Стр.1/1"  # a dropped letter, lost spaces
    )
    doc = answer_chunk([(1, page)]).documents[0]
    assert (doc.type, doc.number, doc.date, doc.amount, doc.currency) == (
        DocType.INVOICE, "INV-24-0003", "2024-03-05", 12345.5, "RUB"
    )  # fmt: skip
    assert doc.counterparty == "ООО «Лес»" and doc.fields[0].value == "ru"
    assert doc.title == "СЧEТ НА ОПЛAТУ № INV-24-0003"


def test_an_empty_chunk_has_an_empty_answer() -> None:
    answer = answer_chunk([])
    assert answer.documents == [] and answer.pages == [] and not answer.first_continues_previous


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("12,345.50 USD", (12345.5, "USD")),
        ("12 345,50 RUB", (12345.5, "RUB")),
        ("12345,50 rub", (12345.5, "RUB")),
        ("1,000 EUR", (1000.0, "EUR")),
        ("7 USD", (7.0, "USD")),
        ("n/a", (None, None)),
    ],
)
def test_parse_amount(value: str, expected: tuple[float | None, str | None]) -> None:
    assert parse_amount(value) == expected


def test_parse_date_and_near() -> None:
    assert parse_date("Date: 2024-02-30, then 05.03.2024") == "2024-03-05"
    assert parse_date("on 2024 - 03 - 05") == "2024-03-05" and parse_date("none") is None
    assert near("conterparty", "counterparty") and near("amount", "amounts") and not near("akt", "ak")
    assert fold("СЧЁТ № АСТ") == fold("cчет no act")
