"""The answer Claude gives for one chunk, as a pydantic model; its JSON schema is the structured output.

Field descriptions travel in the schema, so they are written for Claude. Changing this model or the
prompt changes the answers: bump ``PROMPT_VERSION`` with it (it is part of every processing key).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PROMPT_VERSION = "2026-11-30.1"


class DocType(StrEnum):
    """Kinds of documents found in bundles."""

    INVOICE = "invoice"
    ACT = "act"
    CONTRACT = "contract"
    LETTER = "letter"
    RECEIPT = "receipt"
    OTHER = "other"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NamedField(_Strict):
    """Any other field worth keeping, as a name and a value."""

    name: str = Field(description="short snake_case name, e.g. vat_amount, due_date, signatory")
    value: str


class FoundDocument(_Strict):
    """One document, or the part of one, that lies in this chunk. Pages are absolute source pages."""

    first_page: int = Field(description="absolute page number, as labelled 'Page N:'")
    last_page: int = Field(description="absolute page number, as labelled 'Page N:'")
    type: DocType
    title: str | None = Field(description="the heading as printed")
    date: str | None = Field(description="the document's own date, ISO 8601 yyyy-mm-dd")
    number: str | None = Field(description="the document's own number, as printed, without '№' or 'No.'")
    counterparty: str | None = Field(description="the other party's name, as printed")
    amount: float | None = Field(description="the total amount, as a plain number")
    currency: str | None = Field(description="ISO 4217 code, e.g. RUB, USD, EUR")
    reference: str | None = Field(description="the contract or deal number this document belongs to")
    fields: list[NamedField]


class PageRotation(_Strict):
    """Clockwise degrees that make a page upright."""

    page: int
    rotation: Literal[0, 90, 180, 270]


class ChunkAnswer(_Strict):
    """Everything Claude reports about one chunk of up to 8 pages."""

    first_continues_previous: bool = Field(
        description="true when the first document began before this chunk's first page"
    )
    last_continues_next: bool = Field(
        description="true when the last document goes on after this chunk's last page"
    )
    documents: list[FoundDocument] = Field(description="in page order, covering every page exactly once")
    pages: list[PageRotation] = Field(description="one entry per page of the chunk")
