"""The classes file: the shipped files load, a broken one is one line naming the place (exit 2),
the default file renders today's schema, and any edit changes the processing key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raybatch.classes import ClassesFileError, classes_digest, default_classes, load_classes, parse_classes
from raybatch.classes.render import answer_spec, read_prompt
from raybatch.classes.values import check_values
from raybatch.claude.answer import DocType
from raybatch.cli import main
from raybatch.settings import Modality
from raybatch.steps.build_requests import RequestConfig

HERE = Path(__file__).parent
GOOD = """\
fields:
  title: {type: string}
classes:
  invoice:
    description: A bill.
    hints: [Invoice]
    fields:
      number: {type: string}
      currency: {type: string, enum: [USD, EUR]}
    required: [number]
"""


def test_the_default_file_has_todays_classes_and_fields() -> None:
    classes = default_classes()
    assert list(classes.classes) == [t.value for t in DocType]
    assert list(classes.fields) == [
        "title",
        "date",
        "number",
        "counterparty",
        "amount",
        "currency",
        "reference",
    ]
    assert classes.group_by == ("counterparty", "reference")


def test_the_default_schema_is_todays_but_for_the_date_format_and_the_confidence() -> None:
    today = json.loads((HERE / "default_schema.json").read_text(encoding="utf-8"))
    schema = answer_spec(default_classes()).schema
    document = schema["$defs"]["FoundDocument"]
    date = document["properties"]["date"]["anyOf"][0]
    assert date.pop("format") == "date"
    confidence = document["properties"].pop("confidence")  # the model's own (raybatch.review)
    assert confidence["anyOf"] == [{"type": "number"}, {"type": "null"}]
    document["required"].remove("confidence")
    assert schema == today


def test_other_is_always_a_class() -> None:
    assert list(parse_classes(GOOD).classes) == ["invoice", "other"]


@pytest.mark.parametrize(
    ("edit", "place"),
    [
        (GOOD.replace("{type: string}\nclasses", "{type: strin}\nclasses"), "field title, type"),
        (GOOD + "  invoice:\n    description: again\n", "'invoice' given twice"),
        (GOOD.replace("required: [number]", "required: [total]"), "class invoice, field total: required"),
        (GOOD.replace("hints: [Invoice]", "hints: [Invoice"), "not valid YAML"),
        (GOOD.replace("  invoice:", "  Invoice:"), "class Invoice: a class's name is snake_case"),
        (GOOD + "group_by: [nothing]\n", "group_by: 'nothing' is not one of the common fields"),
    ],
)
def test_a_broken_file_is_one_line_naming_the_place(edit: str, place: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "mine.yaml"
    path.write_text(edit, encoding="utf-8")
    with pytest.raises(ClassesFileError, match=r"classes file mine\.yaml: ") as caught:
        load_classes(path)
    assert place in str(caught.value) and "\n" not in str(caught.value)
    assert main(["classes", "check", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and place in err


def test_editing_a_description_changes_the_processing_key() -> None:
    edited = parse_classes(GOOD.replace("A bill.", "A bill asking for money."))
    keys = [
        RequestConfig("m", 4096, Modality.TEXT, 0.8, answer=answer_spec(classes)).key("ab" * 32, 0)
        for classes in (parse_classes(GOOD), edited)
    ]
    assert keys[0] != keys[1] and classes_digest(parse_classes(GOOD)) != classes_digest(edited)
    assert RequestConfig("m", 4096, Modality.TEXT, 0.8).key("ab" * 32, 0) not in keys  # the default file


def test_a_value_outside_its_enum_is_kept_with_a_reason() -> None:
    checked = check_values(parse_classes(GOOD), "invoice", {"number": None, "currency": "RUB", "title": 5})
    assert checked.values == {"title": "5", "number": None, "currency": "RUB"}
    assert set(checked.problems) == {
        ("currency", "not one of USD, EUR"),
        ("title", "not text"),
        ("number", "required, missing"),
    }


def test_an_unknown_class_becomes_other_with_a_reason() -> None:
    checked = check_values(parse_classes(GOOD), "memo", {"title": "x"})
    assert (checked.doc_type, checked.problems) == ("other", (("type", "'memo' is not a class"),))


def test_nested_values_are_checked_part_by_part() -> None:
    logistics = load_classes("logistics")
    items = [{"description": "bolts", "amount": "12"}, {"description": "nuts", "amount": 3}]
    checked = check_values(
        logistics, "commercial_invoice", {"line_items": items, "total": 1.5, "invoice_number": "A"}
    )
    assert checked.problems == (("line_items[0].amount", "not a number"),)
    assert checked.values["line_items"][1] == {"description": "nuts", "amount": 3.0}


def test_the_prompt_names_every_class_hint_and_label() -> None:
    spec = answer_spec(load_classes("logistics"))
    taxonomy = read_prompt(spec.system_prompt)
    assert taxonomy.hints["bill_of_lading"] == ("Bill of Lading", "Sea Waybill")
    assert taxonomy.label("bill_of_lading", "bl_number") == "B/L No"
    assert taxonomy.label("packing_list", "shipment_ref") == "Shipment Ref"
    assert taxonomy.label("packing_list", "packages") == "packages"
    assert "English" in spec.system_prompt


def test_classes_show_prints_the_default_file(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["classes", "show"]) == 0
    assert parse_classes(capsys.readouterr().out) == default_classes()


def test_classes_check_lists_classes_fields_and_tokens(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["classes", "check", "logistics"]) == 0
    out = capsys.readouterr().out
    assert "bill_of_lading" in out and "bl_number" in out and "tokens" in out


@pytest.mark.parametrize("page", ["README.md", "docs/classes.md"])
def test_the_classes_files_the_docs_show_are_valid(page: str) -> None:
    import re

    text = (HERE.parents[1] / page).read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "classes:" in b]
    assert blocks
    for block in blocks:
        assert parse_classes(block).classes
