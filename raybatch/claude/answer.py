"""The answer Claude gives for one chunk, as a pydantic model; its JSON schema is the structured output."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict

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

    name: str
    value: str


class FoundDocument(_Strict):
    """One document, or the part of one, that lies in this chunk. Pages are absolute source pages."""

    first_page: int
    last_page: int
    type: DocType
    title: str | None
    date: str | None  # ISO 8601, yyyy-mm-dd
    number: str | None
    counterparty: str | None
    amount: float | None
    currency: str | None
    reference: str | None  # the contract or deal number the document belongs to
    fields: list[NamedField]


class PageRotation(_Strict):
    """Clockwise degrees that make a page upright."""

    page: int
    rotation: Literal[0, 90, 180, 270]


class ChunkAnswer(_Strict):
    """Everything Claude reports about one chunk of up to 8 pages."""

    first_continues_previous: bool  # the first document began in the previous chunk
    last_continues_next: bool  # the last document goes on into the next chunk
    documents: list[FoundDocument]
    pages: list[PageRotation]
