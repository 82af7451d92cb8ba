"""The sample corpus's ground truth (``truth.json``) as typed models, and its loader.

Pages are 1-based and inclusive. ``rotation`` is the clockwise turn in degrees that makes a page
upright. ``size`` names the upright paper format (``A4``, ``Letter``, ``A5``, ``A4-landscape``); a page
turned by 90 or 270 lies in the PDF with its width and height swapped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from raybatch.claude.answer import DocType


class _Truth(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TruthPage(_Truth):
    """How one page of a bundle was made."""

    page: int
    scanned: bool
    rotation: Literal[0, 90, 180, 270]
    blank: bool
    size: str


class TruthDocument(_Truth):
    """One document of a bundle, with its key fields as printed (dates in ISO 8601)."""

    index: int
    first_page: int
    last_page: int
    type: DocType
    title: str
    date: str
    number: str
    counterparty: str
    amount: float | None
    currency: str | None
    reference: str
    language: Literal["en", "ru"]
    group: str
    fields: dict[str, Any] = Field(default_factory=dict)  # the same by the classes file's names


class TruthBundle(_Truth):
    """One PDF of the corpus."""

    file: str
    sha256: str
    pages: int
    page_info: list[TruthPage]
    documents: list[TruthDocument]


class TruthGroup(_Truth):
    """Documents that belong together: same counterparty and deal reference, across bundles."""

    key: str
    counterparty: str
    reference: str
    documents: list[tuple[str, int]]  # (bundle file, document index)


class Truth(_Truth):
    """Everything ``truth.json`` holds."""

    seed: int
    bundles: list[TruthBundle]
    groups: list[TruthGroup]

    def bundle(self, file: str) -> TruthBundle:
        """The bundle written as ``file``."""
        for bundle in self.bundles:
            if bundle.file == file:
                return bundle
        raise KeyError(file)


def group_key(counterparty: str, reference: str) -> str:
    """The key that ties a deal's documents together: its reference and counterparty."""
    return f"{reference}|{counterparty}"


def load_truth(path: str | Path) -> Truth:
    """Read and validate a ``truth.json``."""
    return Truth.model_validate_json(Path(path).read_bytes())
