"""The emulator's doubt: answers made wrong, or unsure, on purpose, so review has work to do.

Four knobs on ``Faults``, each a fraction of requests, drawn from the request's custom_id (the
same request is doubted the same way every time, in batches and synchronous calls alike):

    wrong_split_fraction     the first document of several pages split after its first page, or
                             (when every document has one page) the first two merged
    wrong_class_fraction     the first document given another class
    wrong_field_fraction     the first document's amount ten times too large (its number, when it
                             has no amount)
    low_confidence_fraction  every document of the answer said to be unsure (confidence 0.35)

A document made wrong says so the way a careful model would: confidence 0.5. An answer no knob
draws is sent as the responder wrote it, byte for byte; one that does not parse is never doubted.
"""

from __future__ import annotations

import hashlib

from pydantic import ValidationError

from raybatch.claude.answer import ChunkAnswer, DocType, FoundDocument
from raybatch.claude.emulator.config import Faults, _json_object
from raybatch.errors import ConfigError

UNSURE, WRONG = 0.35, 0.5
KNOBS = ("wrong_split", "wrong_class", "wrong_field", "low_confidence")
_CLASSES = [t for t in DocType if t is not DocType.OTHER]


def drawn(custom_id: str, knob: str, fraction: float) -> bool:
    """Whether the request ``custom_id`` is hit by ``knob`` at ``fraction`` (the same every time)."""
    if fraction <= 0:
        return False
    digest = hashlib.sha256(f"{knob}:{custom_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def doubt(answer: str, custom_id: str | None, faults: Faults) -> str:
    """``answer`` with the doubt the knobs draw for ``custom_id`` (unchanged without one)."""
    hits = {
        knob for knob in KNOBS if custom_id and drawn(custom_id, knob, getattr(faults, f"{knob}_fraction"))
    }
    if not hits:
        return answer
    try:
        parsed = ChunkAnswer.model_validate_json(answer)
    except ValidationError:
        return answer
    documents = list(parsed.documents)
    if "wrong_split" in hits:
        documents = _wrong_split(documents)
    if "wrong_class" in hits:
        documents[0] = _wrong_class(documents[0])
    if "wrong_field" in hits:
        documents[0] = _wrong_field(documents[0])
    if "low_confidence" in hits:
        documents = [doc.model_copy(update={"confidence": UNSURE}) for doc in documents]
    return parsed.model_copy(update={"documents": documents}).model_dump_json()


def _wrong_split(documents: list[FoundDocument]) -> list[FoundDocument]:
    for at, doc in enumerate(documents):
        if doc.last_page > doc.first_page:
            head = doc.model_copy(update={"last_page": doc.first_page, "confidence": WRONG})
            tail = doc.model_copy(update={"first_page": doc.first_page + 1, "confidence": WRONG})
            return [*documents[:at], head, tail, *documents[at + 1 :]]
    if len(documents) < 2:
        return documents
    merged = documents[0].model_copy(update={"last_page": documents[1].last_page, "confidence": WRONG})
    return [merged, *documents[2:]]


def _wrong_class(doc: FoundDocument) -> FoundDocument:
    others = [t for t in _CLASSES if t != doc.type]
    return doc.model_copy(update={"type": others[0], "confidence": WRONG})


def _wrong_field(doc: FoundDocument) -> FoundDocument:
    values = doc.values
    if isinstance(values.get("amount"), int | float):
        return doc.model_copy(update={"amount": values["amount"] * 10, "confidence": WRONG})
    return doc.model_copy(update={"number": f"{values.get('number') or ''}9", "confidence": WRONG})


# What ``raybatch demo`` asks for: a little of each, so a new user meets a review queue.
DEMO_DOUBT = {f"{knob}_fraction": 0.08 for knob in KNOBS}


def doubt_faults(text: str | None) -> Faults:
    """The built-in emulator's faults from EMULATOR_DOUBT (JSON of the four ``*_fraction`` knobs)."""
    if not text:
        return Faults()
    data = _json_object(text)
    unknown = set(data) - {f"{knob}_fraction" for knob in KNOBS}
    if unknown:
        raise ConfigError(
            f"EMULATOR_DOUBT takes {', '.join(f'{k}_fraction' for k in KNOBS)}; not {sorted(unknown)}"
        )
    return Faults.from_mapping(data)
