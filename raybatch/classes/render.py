"""The classes file made into what a request carries: the structured-output schema and the prompt.

Schema: each document is an object with its pages, its ``type`` and every field its class has (null
when absent), plus ``fields`` (other name/value pairs). Classes without fields of their own share
one object whose ``type`` is an enum of them (for the default file that is the whole schema, as it
was before classes files); each class with its own fields gets its own object, ``type`` fixed to
it, and documents are ``anyOf`` those objects. A field's ``title`` (its label as printed) joins its
description. ``AnswerSpec`` holds the rendered prompt, the schema and the canonical classes: the
processing key hashes all three, so any edit makes new answers.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any

from raybatch.classes.load import canonical
from raybatch.classes.model import OTHER, ClassesFile, FieldSpec, SplitMode
from raybatch.classes.prompt import system_prompt
from raybatch.claude.answer import CONFIDENCE_DESCRIPTION
from raybatch.claude.schema import strict_schema

_PAGE = {"description": "absolute page number, as labelled 'Page N:'", "type": "integer"}
_NULL = {"type": "null"}


@dataclass(frozen=True)
class AnswerSpec:
    """What a request asks for, rendered from one classes file: its prompt, schema and split mode."""

    system_prompt: str
    schema_json: str
    classes_json: str  # the canonical classes file
    split: SplitMode = SplitMode.LLM

    @property
    def schema(self) -> dict[str, Any]:
        """The structured-output schema (a fresh copy)."""
        result: dict[str, Any] = json.loads(self.schema_json)
        return result


def answer_spec(classes: ClassesFile) -> AnswerSpec:
    """The prompt and schema of ``classes`` (made once per file)."""
    return _spec_of(canonical(classes))


@functools.lru_cache(maxsize=16)
def _spec_of(classes_json: str) -> AnswerSpec:
    classes = ClassesFile.model_validate_json(classes_json)
    schema = json.dumps(answer_schema(classes), ensure_ascii=False)
    return AnswerSpec(system_prompt(classes), schema, classes_json, classes.split)


def answer_schema(classes: ClassesFile) -> dict[str, Any]:
    """The structured-output schema of one chunk's answer under ``classes``."""
    plain = [name for name, spec in classes.classes.items() if not spec.fields]
    own = [name for name, spec in classes.classes.items() if spec.fields]
    defs: dict[str, Any] = {}
    refs: list[dict[str, str]] = []
    if plain:
        defs["DocType"] = {"description": "Kinds of documents found in bundles.", "enum": plain}
        defs["FoundDocument"] = _document(classes, {"$ref": "#/$defs/DocType"}, {}, None)
        refs.append({"$ref": "#/$defs/FoundDocument"})
    for name in own:
        title = f"Found_{name}"
        defs[title] = _document(classes, {"enum": [name]}, classes.classes[name].fields, name)
        refs.append({"$ref": f"#/$defs/{title}"})
    defs["NamedField"] = _NAMED_FIELD
    defs["PageRotation"] = _PAGE_ROTATION
    items = refs[0] if len(refs) == 1 else {"anyOf": refs}
    return strict_schema({"$defs": defs, **_chunk_answer(items)})


def _document(
    classes: ClassesFile, type_node: dict[str, Any], own: dict[str, FieldSpec], name: str | None
) -> dict[str, Any]:
    what = f"One document of class {name}" if name else "One document"
    where = "or the part of one, that lies in this chunk. Pages are absolute source pages."
    properties = {"first_page": _PAGE, "last_page": _PAGE, "type": type_node}
    properties |= {field: field_schema(spec) for field, spec in {**classes.fields, **own}.items()}
    properties["fields"] = {"items": {"$ref": "#/$defs/NamedField"}, "type": "array"}
    properties["confidence"] = {"anyOf": [{"type": "number"}, _NULL], "description": CONFIDENCE_DESCRIPTION}
    return {
        "description": f"{what}, {where}",
        "properties": properties,
        "type": "object",
    }


def field_schema(spec: FieldSpec) -> dict[str, Any]:
    """A declared field as a nullable JSON Schema property."""
    node: dict[str, Any] = {"anyOf": [_value_schema(spec), _NULL]}
    description = " ".join(filter(None, [spec.description, _printed_as(spec.title)]))
    if description:
        node["description"] = description
    return node


def _printed_as(title: str | None) -> str | None:
    return f"(printed as {json.dumps(title, ensure_ascii=False)})" if title else None


def _value_schema(spec: FieldSpec) -> dict[str, Any]:
    if spec.enum is not None:
        return {"enum": list(spec.enum)}
    node: dict[str, Any] = {"type": spec.type}
    if spec.format:
        node["format"] = spec.format
    if spec.items is not None:
        node["items"] = _value_schema(spec.items)
    if spec.properties is not None:
        node["properties"] = {name: field_schema(sub) for name, sub in spec.properties.items()}
    return node


_NAMED_FIELD = {
    "description": "Any other field worth keeping, as a name and a value.",
    "properties": {
        "name": {
            "description": "short snake_case name, e.g. vat_amount, due_date, signatory",
            "type": "string",
        },
        "value": {"type": "string"},
    },
    "type": "object",
}
_PAGE_ROTATION = {
    "description": "Clockwise degrees that make a page upright.",
    "properties": {"page": {"type": "integer"}, "rotation": {"enum": [0, 90, 180, 270]}},
    "type": "object",
}


def _chunk_answer(items: dict[str, Any]) -> dict[str, Any]:
    flag = "true when the {} document {} this chunk's {} page"
    return {
        "description": "Everything Claude reports about one chunk of up to 8 pages.",
        "properties": {
            "first_continues_previous": {
                "description": flag.format("first", "began before", "first"),
                "type": "boolean",
            },
            "last_continues_next": {
                "description": "true when the last document goes on after this chunk's last page",
                "type": "boolean",
            },
            "documents": {
                "description": "in page order, covering every page exactly once",
                "items": items,
                "type": "array",
            },
            "pages": {
                "description": "one entry per page of the chunk",
                "items": {"$ref": "#/$defs/PageRotation"},
                "type": "array",
            },
        },
        "type": "object",
    }


_CLASS_LINE = re.compile(r"^- ([a-z][a-z0-9_]*): .*?(?: Opens with: (.*))?$")
_FIELD_LINE = re.compile(r'^- ([a-z][a-z0-9_]*)(?: \(printed as ("(?:[^"\\]|\\.)*")\))?:')
_HINT = re.compile(r'"(?:[^"\\]|\\.)*"')


@dataclass(frozen=True)
class PromptTaxonomy:
    """What a rendered prompt says of its classes: each one's hints, and each field's label."""

    hints: dict[str, tuple[str, ...]]
    labels: dict[tuple[str, str], str]  # (class, or "" for the common fields; field) → label

    def label(self, class_name: str, field: str) -> str:
        """The label a field's value follows on a page: its title, else its name with spaces."""
        default = field.replace("_", " ")
        return self.labels.get((class_name, field)) or self.labels.get(("", field)) or default


def read_prompt(text: str) -> PromptTaxonomy:
    """The classes and field labels a prompt made by ``system_prompt`` names (for the emulator)."""
    hints: dict[str, tuple[str, ...]] = {}
    labels: dict[tuple[str, str], str] = {}
    section = ""
    for line in text.splitlines():
        if not line.startswith("- "):
            section = line
            continue
        if section.startswith("Classes"):
            match = _CLASS_LINE.match(line)
            if match:
                hints[match[1]] = tuple(json.loads(h) for h in _HINT.findall(match[2] or ""))
        elif section.startswith("Fields"):
            match = _FIELD_LINE.match(line)
            owner = section.removeprefix("Fields of class ").split(" ", 1)[0].rstrip(":,")
            if match and match[2]:
                labels[(owner if section.startswith("Fields of class") else "", match[1])] = json.loads(
                    match[2]
                )
    hints.setdefault(OTHER, ())
    return PromptTaxonomy(hints, labels)
