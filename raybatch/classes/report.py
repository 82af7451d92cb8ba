"""``raybatch classes check FILE`` and ``raybatch classes show``: what a file declares, and the
default file to start from."""

from __future__ import annotations

from raybatch.classes.load import load_classes, shipped_text
from raybatch.classes.model import ClassesFile, FieldSpec
from raybatch.classes.render import AnswerSpec, answer_spec


def request_tokens(spec: AnswerSpec) -> int:
    """Input tokens the prompt and schema add to every request (estimated as the emulator counts)."""
    from raybatch.claude.emulator.tokens import estimate_input_tokens

    params = {
        "system": [{"type": "text", "text": spec.system_prompt}],
        "output_config": {"format": {"type": "json_schema", "schema": spec.schema}},
    }
    return estimate_input_tokens(params, 0)


def check_report(path: str) -> str:
    """The classes of a valid file, their fields, and what the prompt and schema cost a request."""
    classes = load_classes(path)
    spec = answer_spec(classes)
    languages = ", ".join(classes.languages)
    lines = [f"{path}: {len(classes.classes)} classes, split {classes.split}, languages {languages}"]
    lines.append(f"  every class: {_fields(classes.fields)}")
    for name, cls in classes.classes.items():
        own = f": {_fields(cls.fields)}" if cls.fields else ""
        required = f" (required: {', '.join(cls.required)})" if cls.required else ""
        lines.append(f"  {name}{own}{required}")
    if classes.group_by:
        lines.append(f"  grouped by: {', '.join(classes.group_by)}")
    lines.append(f"  prompt and schema: about {request_tokens(spec)} input tokens per request")
    return "\n".join(lines)


def check_summary(path: str) -> dict[str, object]:
    """``check_report`` as one JSON-able object."""
    classes = load_classes(path)
    return {
        "file": path,
        "split": str(classes.split),
        "languages": list(classes.languages),
        "fields": {name: _kind(spec) for name, spec in classes.fields.items()},
        "classes": {
            name: {
                "fields": {f: _kind(spec) for f, spec in cls.fields.items()},
                "required": list(cls.required),
            }
            for name, cls in classes.classes.items()
        },
        "group_by": list(classes.group_by),
        "request_tokens": request_tokens(answer_spec(classes)),
    }


def _fields(fields: dict[str, FieldSpec]) -> str:
    return ", ".join(f"{name} ({_kind(spec)})" for name, spec in fields.items()) or "none"


def _kind(spec: FieldSpec) -> str:
    if spec.enum:
        return "|".join(spec.enum)
    if spec.type == "array" and spec.items is not None:
        return f"list of {_kind(spec.items)}"
    return spec.format or spec.type


def show_text() -> str:
    """The shipped default file, to copy and edit."""
    return shipped_text()


__all__ = ["ClassesFile", "check_report", "request_tokens", "show_text"]
