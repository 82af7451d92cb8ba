"""The emulator follows any classes file: hints open documents, ``LABEL: value`` lines fill fields."""

from __future__ import annotations

import json

from raybatch.classes import default_classes, load_classes
from raybatch.classes.render import answer_spec
from raybatch.claude.emulator.model import rules_responder


def _params(classes_name: str | None, pages: list[tuple[int, str]]) -> dict:  # type: ignore[type-arg]
    spec = answer_spec(load_classes(classes_name) if classes_name else default_classes())
    content = [{"type": "text", "text": f"Page {page}:\n{text}"} for page, text in pages]
    return {
        "model": "m",
        "max_tokens": 4096,
        "system": [{"type": "text", "text": spec.system_prompt}],
        "messages": [{"role": "user", "content": content}],
        "output_config": {"format": {"type": "json_schema", "schema": spec.schema}},
    }


PAGES = [
    (1, "Welcome aboard\nnothing here"),
    (
        2,
        "x\ny\nz\nPACKING LIST\nShipper: Nordic Timber AB\nPackages: 12\n"
        "Gross Weight: 1,250.5\nHazardous: yes",
    ),
    (3, "(continued)\nPackages: 99"),
    (4, "a\nb\nc\nd\ne\nBill of Lading\nB/L No: X"),  # the hint is past the first five lines
    (5, "Sea Waybill\nB/L No: MSCU1\nContainers: two\nContainer numbers: A1, B2\nDate: 2026-13-01"),
]


def test_hints_open_documents_and_labels_fill_fields_as_their_types() -> None:
    answer = json.loads(rules_responder(_params("logistics", PAGES)))
    docs = answer["documents"]
    assert [(d["first_page"], d["last_page"], d["type"]) for d in docs] == [
        (1, 1, "other"),
        (2, 4, "packing_list"),
        (5, 5, "bill_of_lading"),
    ]
    packing, lading = docs[1], docs[2]
    assert (packing["shipper"], packing["packages"], packing["gross_weight_kg"], packing["hazardous"]) == (
        "Nordic Timber AB", 12, 1250.5, True,
    )  # fmt: skip
    assert (lading["bl_number"], lading["containers"], lading["container_numbers"], lading["date"]) == (
        "MSCU1", None, ["A1", "B2"], None,
    )  # fmt: skip
    assert answer["first_continues_previous"] is False


def test_a_chunk_starting_without_a_hint_continues_the_document_before() -> None:
    answer = json.loads(rules_responder(_params("logistics", [(9, "more goods"), (10, "Packing List")])))
    assert answer["first_continues_previous"] is True
    assert [d["type"] for d in answer["documents"]] == ["other", "packing_list"]


def test_the_default_file_keeps_the_sample_corpus_rules() -> None:
    answer = json.loads(rules_responder(_params(None, [(1, "INVOICE No. INV-24-0001\nCounterparty: ACME")])))
    assert answer["documents"][0]["type"] == "invoice" and answer["documents"][0]["number"] == "INV-24-0001"
