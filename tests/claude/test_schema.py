"""The answer schema fits structured outputs' subset and still describes ChunkAnswer."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from anthropic.lib._parse._transform import transform_schema

from raybatch.claude.answer import PROMPT_VERSION, ChunkAnswer
from raybatch.claude.prompt import SYSTEM_PROMPT, closing_instruction
from raybatch.claude.schema import SUPPORTED_KEYWORDS, answer_schema, strict_schema

GOOD = {
    "first_continues_previous": False,
    "last_continues_next": True,
    "documents": [
        {
            "first_page": 9, "last_page": 10, "type": "invoice", "title": "Счёт № 7", "date": "2024-03-01",
            "number": "7", "counterparty": "ООО «Ромашка»", "amount": 1234.5, "currency": "RUB",
            "reference": None, "confidence": 0.9, "fields": [{"name": "vat", "value": "205.75"}],
        }
    ],
    "pages": [{"page": 9, "rotation": 0}, {"page": 10, "rotation": 90}],
}  # fmt: skip


def _objects(node: Any) -> list[dict[str, Any]]:
    """Every schema node that is an object type."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if node.get("type") == "object":
            found.append(node)
        for key, value in node.items():
            subs = value.values() if key in ("properties", "$defs") else [value]
            for sub in subs:
                found.extend(_objects(sub) if isinstance(sub, (dict, list)) else [])
    elif isinstance(node, list):
        for item in node:
            found.extend(_objects(item))
    return found


def _keywords(node: Any) -> set[str]:
    keys: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            keys.add(key)
            subs = list(value.values()) if key in ("properties", "$defs") else [value]
            for sub in subs:
                keys |= _keywords(sub)
    elif isinstance(node, list):
        for item in node:
            keys |= _keywords(item)
    return keys


def test_every_object_is_closed_and_requires_all_its_properties() -> None:
    objects = _objects(answer_schema())
    assert len(objects) == 4  # ChunkAnswer, FoundDocument, NamedField, PageRotation
    for node in objects:
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])


def test_only_supported_keywords_and_no_titles() -> None:
    assert _keywords(answer_schema()) <= SUPPORTED_KEYWORDS


def test_nullable_fields_are_unions_with_null() -> None:
    document = answer_schema()["$defs"]["FoundDocument"]["properties"]
    assert document["amount"]["anyOf"] == [{"type": "number"}, {"type": "null"}]
    assert document["first_page"]["type"] == "integer"


def test_the_sdk_own_transform_leaves_it_unchanged() -> None:
    schema = answer_schema()
    assert transform_schema(schema) == schema


def test_schema_accepts_a_valid_answer_and_rejects_extra_keys() -> None:
    schema = answer_schema()
    jsonschema.validate(GOOD, schema)
    ChunkAnswer.model_validate(GOOD)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**GOOD, "note": "x"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**GOOD, "pages": [{"page": 9, "rotation": 45}]}, schema)


def test_answer_schema_is_a_fresh_copy() -> None:
    answer_schema()["properties"].clear()
    assert "documents" in answer_schema()["properties"]


def test_unsupported_keywords_are_refused() -> None:
    with pytest.raises(ValueError, match="minimum"):
        strict_schema({"type": "integer", "minimum": 1})
    with pytest.raises(ValueError, match="minItems"):
        strict_schema({"type": "array", "items": {"type": "string"}, "minItems": 2})
    with pytest.raises(ValueError, match="local"):
        strict_schema({"$ref": "https://example.com/schema.json"})


def test_prompt_carries_its_version_and_the_closing_line_is_not_a_page() -> None:
    assert PROMPT_VERSION in SYSTEM_PROMPT
    closing = closing_instruction(9, 16)
    assert "9" in closing and "16" in closing and not closing.startswith("Page")
