"""The structured-output schema, adapted to the subset that structured outputs accept.

Structured outputs (``output_config.format``) take a JSON schema where every object has
``additionalProperties: false``, and reject numeric, string-length and most array constraints,
recursive and external references. ``raybatch.classes.render`` builds the schema from a classes
file; this walks it once and makes it so: every object closed and all its properties required,
titles and defaults dropped (bytes in every request, no meaning to the model), anything unsupported
refused loudly rather than sent.
"""

from __future__ import annotations

from typing import Any

# Keywords a node may keep; anything else is a schema we must not send.
SUPPORTED_KEYWORDS = frozenset(
    {
        "type", "description", "enum", "const", "anyOf", "allOf", "properties", "required",
        "additionalProperties", "items", "minItems", "$ref", "$defs", "format",
    }
)  # fmt: skip
_DROPPED = frozenset({"title", "default", "examples"})
_CONTAINERS = {"anyOf", "allOf"}


def answer_schema() -> dict[str, Any]:
    """The structured-output schema under the default classes file (a fresh copy each call)."""
    from raybatch.classes import default_classes
    from raybatch.classes.render import answer_spec

    return answer_spec(default_classes()).schema


def strict_schema(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` adapted to structured outputs: objects closed, all properties required."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key not in SUPPORTED_KEYWORDS:
            raise ValueError(f"schema keyword {key!r} is not supported by structured outputs")
        out[key] = _adapt(key, value)
    if "enum" in out or "const" in out:
        out.pop("type", None)  # the literals say it; the SDK's own transform drops it too
    if out.get("type") == "object":
        out["additionalProperties"] = False
        out["required"] = list(out.get("properties", {}))
    if "minItems" in out and out["minItems"] not in (0, 1):
        raise ValueError("structured outputs accept minItems 0 or 1 only")
    return out


def _adapt(key: str, value: Any) -> Any:
    if key in ("properties", "$defs"):
        return {name: strict_schema(sub) for name, sub in value.items()}
    if key in _CONTAINERS:
        return [strict_schema(sub) for sub in value]
    if key == "items":
        return strict_schema(value)
    if key == "$ref" and not str(value).startswith("#/$defs/"):
        raise ValueError("structured outputs accept local $defs references only")
    return value
