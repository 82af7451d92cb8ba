"""The system prompt, rendered from a classes file: its classes, hints, fields and languages.

The emulator reads the classes and labels back from the lines this writes (``render.read_prompt``):
a class is ``- name: description Opens with: "hint" | "hint"`` under ``Classes``, a field
``- name (printed as "Label"): description`` under ``Fields``.
"""

from __future__ import annotations

import json

from raybatch.classes.model import ClassesFile, FieldSpec, SplitMode
from raybatch.claude.answer import PROMPT_VERSION

LANGUAGES = {  # Tesseract's codes of the languages a prompt may name
    "eng": "English", "rus": "Russian", "deu": "German", "fra": "French", "spa": "Spanish",
    "ita": "Italian", "por": "Portuguese", "nld": "Dutch", "pol": "Polish", "tur": "Turkish",
    "ukr": "Ukrainian", "chi_sim": "Chinese", "jpn": "Japanese", "kor": "Korean", "ara": "Arabic",
}  # fmt: skip

_INPUT = """\
You split scanned and digital paper bundles into their documents. (prompt version {version})

Input: one chunk of consecutive pages from a longer bundle. Each page starts with a text block
"Page N:" where N is the page's absolute number in the whole bundle; the page's text (from its text
layer or from OCR, possibly noisy) follows on the next lines when there is any, then usually the
page's image. A page sent without an image is represented by its text alone. Documents are in
{languages}."""

_SPLIT = {
    SplitMode.LLM: """\
Split the chunk into documents:
- A new document starts where a new heading, document number, document type or counterparty starts
  (the headings and phrases each class opens with are listed above). Use type "other" for anything
  else.
- Pages without a heading (continuations, annexes, signature pages, blank pages) belong to the
  document they sit in: a page belongs to the document before it unless it clearly starts a new one.
- List documents in page order. Every page of the chunk belongs to exactly one document; ranges do
  not overlap and leave no gaps. Use the absolute page numbers exactly as labelled, never positions
  inside the chunk.
- first_continues_previous: true when the chunk's first page continues a document that began before
  it (no heading of its own, text running on, "page 2 of 3", "continued"). last_continues_next: true
  when the last document is visibly unfinished (no signature or totals yet, "continued", "page 1 of
  3"). When unsure, say false.""",
    SplitMode.PAGE: """\
Every page is its own document: list one document per page of the chunk (first_page = last_page),
in page order, with the absolute page numbers exactly as labelled. first_continues_previous and
last_continues_next are false.""",
    SplitMode.FILE: """\
The whole bundle is one document: list exactly one document, from the chunk's first page to its
last, with the absolute page numbers exactly as labelled. first_continues_previous is true unless
the chunk starts at page 1; last_continues_next is true.""",
}

_CLOSING = """\
- fields: other useful name/value pairs (vat, due_date, signatory, ...); an empty list is fine.
- For a document that continues from the previous chunk, repeat the fields visible on its pages
  here; do not guess the ones that are not.

pages: one entry per page of the chunk with the clockwise rotation (0, 90, 180 or 270) that makes
the page upright, judged from its image; 0 for a page sent as text only.

Answer with the JSON object only."""


def system_prompt(classes: ClassesFile) -> str:
    """The system prompt of every request made under ``classes``."""
    parts = [
        _INPUT.format(version=PROMPT_VERSION, languages=_languages(classes.languages)),
        "Classes (the answer's type), with the headings or phrases that open a document of each:\n"
        + "\n".join(
            _class_line(name, spec.description, spec.hints) for name, spec in classes.classes.items()
        ),
        _SPLIT[classes.split],
        "Fields of every document: give what is printed on it, or null when it is not there "
        "(dates as yyyy-mm-dd, amounts as plain numbers such as 12345.67):\n"
        + "\n".join(_field_line(name, spec) for name, spec in classes.fields.items()),
    ]
    for name, spec in classes.classes.items():
        if spec.fields:
            lines = "\n".join(_field_line(field, sub) for field, sub in spec.fields.items())
            required = f" ({', '.join(spec.required)} must be given)" if spec.required else ""
            parts.append(f"Fields of class {name}, besides those{required}:\n{lines}")
    parts.append(_CLOSING)
    return "\n\n".join(parts)


def _languages(codes: tuple[str, ...]) -> str:
    names = [LANGUAGES.get(code, code) for code in codes]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _class_line(name: str, description: str, hints: tuple[str, ...]) -> str:
    opens = f" Opens with: {' | '.join(json.dumps(h, ensure_ascii=False) for h in hints)}" if hints else ""
    return f"- {name}: {description or name.replace('_', ' ')}{opens}"


def _field_line(name: str, spec: FieldSpec) -> str:
    label = f" (printed as {json.dumps(spec.title, ensure_ascii=False)})" if spec.title else ""
    kind = "a date" if spec.format == "date" else f"one of {', '.join(spec.enum)}" if spec.enum else spec.type
    return f"- {name}{label}: {spec.description or name.replace('_', ' ')} ({kind})"
