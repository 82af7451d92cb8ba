"""The answer Claude gives for one chunk, as a pydantic model; its JSON schema is the structured output.

Field descriptions travel in the schema, so they are written for Claude; a document's own fields come
from ``raybatch.models.DocumentFields``. Changing this model, those fields or the prompt changes the
answers: bump ``PROMPT_VERSION`` with it (it is part of every processing key).
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from raybatch.models import DOCUMENT_FIELDS, DocumentFields

PROMPT_VERSION = "2026-12-01.1"


class DocType(StrEnum):
    """Kinds of documents found in bundles."""

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


class _DocumentPlace(_Strict):
    """Where a found document lies and what it is; ``FoundDocument`` adds its fields."""

    first_page: int = Field(description="absolute page number, as labelled 'Page N:'")
    last_page: int = Field(description="absolute page number, as labelled 'Page N:'")
    type: DocType


if TYPE_CHECKING:  # the type checker reads the declared fields' types; at run time the model is built

    class FoundDocument(_DocumentPlace, DocumentFields):  # type: ignore[misc]  # a model, not a dataclass
        fields: list[NamedField]
        confidence: float | None = None

else:
    FoundDocument = create_model(
        "FoundDocument",
        __base__=_DocumentPlace,
        __module__=__name__,
        __doc__="One document, or the part of one, that lies in this chunk. Pages are absolute source pages.",
        **{spec.name: (spec.kind | None, Field(description=spec.description)) for spec in DOCUMENT_FIELDS},
        fields=(list[NamedField], ...),
        confidence=(float | None, Field(None, description=CONFIDENCE_DESCRIPTION)),
    )


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
