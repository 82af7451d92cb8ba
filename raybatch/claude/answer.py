"""The answer Claude gives for one chunk, as a pydantic model of its shape.

The structured-output schema is rendered from the classes file (``raybatch.classes.render``); this
model checks only what every answer has: pages, flags, a type and the other name/value pairs. A
document's declared fields are kept as they came (``FoundDocument.values``), and checked against
their types when the job is written (``raybatch.classes.values``), so a wrong value never makes an
answer unusable. ``PROMPT_VERSION`` names the prompt's wording; the processing key also hashes the
rendered prompt, the schema and the classes file.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

PROMPT_VERSION = "2026-12-01.2"  # .2: each document says how sure it is


class DocType(StrEnum):
    """The classes of the shipped default file (``raybatch/classes/default.yaml``), for the sample
    corpus and its rules; any other file names its own."""

    INVOICE = "invoice"
    ACT = "act"
    CONTRACT = "contract"
    LETTER = "letter"
    RECEIPT = "receipt"
    OTHER = "other"


# The model's own confidence (raybatch.review reads it); optional, so answers kept from before parse.
CONFIDENCE_DESCRIPTION = "how sure you are of this document's pages, type and fields, from 0 to 1"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NamedField(_Strict):
    """Any other field worth keeping, as a name and a value."""

    name: str = Field(description="short snake_case name, e.g. vat_amount, due_date, signatory")
    value: str


class FoundDocument(BaseModel):
    """One document, or the part of one, that lies in this chunk; its declared fields are the other
    keys (``values``)."""

    model_config = ConfigDict(extra="allow")

    first_page: int
    last_page: int
    type: str
    fields: list[NamedField] = Field(default_factory=list)
    confidence: float | None = Field(None, description=CONFIDENCE_DESCRIPTION)

    @property
    def values(self) -> dict[str, Any]:
        """The declared fields as the answer gave them, by name."""
        return dict(self.model_extra or {})


class PageRotation(_Strict):
    """Clockwise degrees that make a page upright."""

    page: int
    rotation: Literal[0, 90, 180, 270]


class ChunkAnswer(_Strict):
    """Everything Claude reports about one chunk of up to 8 pages; ``repairs`` (never asked of
    Claude) says what its text needed before it parsed."""

    first_continues_previous: bool
    last_continues_next: bool
    documents: list[FoundDocument]
    pages: list[PageRotation]
    repairs: list[str] = Field(default_factory=list)
