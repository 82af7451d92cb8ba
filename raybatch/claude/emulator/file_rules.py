"""The emulator's rule model for a classes file other than the default, read from the request.

The classes and their hints come from the system prompt, the fields' types from the schema (both
rendered from the file by ``raybatch.classes``), so any taxonomy can be tried offline:

- A page whose first five non-empty lines contain one of a class's hints (case-insensitive) starts
  a document of that class; a page with none continues the current document (the bundle's first
  page with none opens an ``other`` document).
- A field's value is read from the first line of the document that reads ``LABEL: value``, LABEL
  being the field's title or its name with ``_`` as spaces (case-insensitive), converted to the
  field's type (null when absent or not convertible; a list of text is split at commas).
- The last document of a chunk is said to go on (the rules cannot see the next page), and pages
  answer rotation 0. The split mode is applied by stitching, whatever the answer says.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

from raybatch.classes.model import OTHER
from raybatch.classes.render import PromptTaxonomy, read_prompt
from raybatch.claude.answer import ChunkAnswer, FoundDocument, PageRotation

HINT_LINES = 5


def answer_by_file(params: Mapping[str, Any], pages: list[tuple[int, str]]) -> ChunkAnswer:
    """Answer one chunk under the classes file its request was rendered from."""
    taxonomy = read_prompt(_system_text(params))
    fields = _field_types(params)
    parts: list[tuple[str, list[tuple[int, str]]]] = []
    continued = False
    for page, text in pages:
        kind = _opens(taxonomy, text)
        if kind is None and parts:
            parts[-1][1].append((page, text))
        elif kind is None and page > 1:
            continued = True
            parts.append((OTHER, [(page, text)]))
        else:
            parts.append((kind or OTHER, [(page, text)]))
    documents = [_document(taxonomy, fields, kind, part) for kind, part in parts]
    return ChunkAnswer(
        first_continues_previous=continued,
        last_continues_next=True,
        documents=documents,
        pages=[PageRotation(page=page, rotation=0) for page, _ in pages],
    )


def _opens(taxonomy: PromptTaxonomy, text: str) -> str | None:
    head = "\n".join([line for line in text.splitlines() if line.strip()][:HINT_LINES]).casefold()
    for kind, hints in taxonomy.hints.items():
        if any(hint.casefold() in head for hint in hints):
            return kind
    return None


def _document(
    taxonomy: PromptTaxonomy,
    fields: Mapping[str, Mapping[str, dict[str, Any]]],
    kind: str,
    part: list[tuple[int, str]],
) -> FoundDocument:
    lines = [line.strip() for _, text in part for line in text.splitlines() if ":" in line]
    own = fields.get(kind) or fields.get("", {})
    values = {name: _read(taxonomy.label(kind, name), schema, lines) for name, schema in own.items()}
    return FoundDocument(first_page=part[0][0], last_page=part[-1][0], type=kind, fields=[], **values)


def _read(label: str, schema: dict[str, Any], lines: Sequence[str]) -> Any:
    wanted = label.casefold()
    for line in lines:
        head, _, tail = line.partition(":")
        if head.strip().casefold() == wanted:
            return convert(schema, tail.strip())
    return None


def convert(schema: dict[str, Any], text: str) -> Any:
    """Text as the schema's type; None when it is not convertible."""
    if not text:
        return None
    if "enum" in schema:
        return next((value for value in schema["enum"] if str(value).casefold() == text.casefold()), None)
    kind = schema.get("type")
    try:
        if kind == "number":
            return float(text.replace(",", "").replace(" ", ""))
        if kind == "integer":
            return int(text.replace(",", "").replace(" ", ""))
    except ValueError:
        return None
    if kind == "boolean":
        return {"yes": True, "true": True, "no": False, "false": False}.get(text.casefold())
    if kind == "array":
        items = schema.get("items") or {}
        return (
            [convert(items, part.strip()) for part in text.split(",")]
            if items.get("type") == "string"
            else None
        )
    if kind == "string":
        return _date(text) if schema.get("format") == "date" else text
    return None


def _date(text: str) -> str | None:
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        return None


def _system_text(params: Mapping[str, Any]) -> str:
    system = params.get("system")
    if isinstance(system, str):
        return system
    return "\n".join(str(block.get("text", "")) for block in system or [] if isinstance(block, Mapping))


def _field_types(params: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """Each class's fields (``""``: the classes that share one object) and their value schemas."""
    schema = ((params.get("output_config") or {}).get("format") or {}).get("schema") or {}
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for name, node in (schema.get("$defs") or {}).items():
        if not (name == "FoundDocument" or name.startswith("Found_")):
            continue
        properties = dict(node.get("properties") or {})
        for key in ("first_page", "last_page", "type", "fields"):
            properties.pop(key, None)
        values = {field: (prop.get("anyOf") or [prop])[0] for field, prop in properties.items()}
        found[name.removeprefix("Found_") if name != "FoundDocument" else ""] = values
    return found


def from_another_file(params: Mapping[str, Any]) -> bool:
    """Whether the request was rendered from a classes file other than the shipped default (the
    default file, and requests not made by raybatch, get the sample corpus's rules)."""
    schema = ((params.get("output_config") or {}).get("format") or {}).get("schema") or {}
    defs = schema.get("$defs") or {}
    rendered = any(name == "FoundDocument" or name.startswith("Found_") for name in defs)
    return rendered and schema != _default_schema()


@functools.cache  # rendered once a process, not once a request; only compared, never changed
def _default_schema() -> dict[str, Any]:
    from raybatch.classes import default_classes
    from raybatch.classes.render import answer_spec

    return answer_spec(default_classes()).schema
