"""The one place writing asks for review: today's answers' signals → each document's score, reasons
and review state; and what a rerun keeps of a reviewed source instead of the model's answer.

Re-pointed at the classes file, only this module changes: its field specs, required fields, the
repaired flag and the per-class ``review_below`` come from there instead of ``TODAY_SPECS``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from raybatch.claude.answer import ChunkAnswer
from raybatch.models import DocumentRecord, ReviewState
from raybatch.review.confidence import Confidence, FieldProblem, Signals, check_values, score, threshold_for
from raybatch.review.signals import TODAY_SPECS, part_signals
from raybatch.steps.stitch import StitchedDocument


@dataclass(frozen=True)
class Thresholds:
    """Review thresholds: a class's own ``review_below`` when it has one, else ``default`` (REVIEW_BELOW)."""

    default: float = 0.7
    per_class: Mapping[str, float | None] = field(default_factory=dict)

    def of(self, doc_type: str) -> float:
        return threshold_for(doc_type, self.per_class, self.default)


def mark_documents(
    records: Sequence[DocumentRecord],
    answers: Sequence[tuple[int, ChunkAnswer]],
    stitched: Sequence[StitchedDocument],
    ocr: Mapping[int, float],
    thresholds: Thresholds,
    *,
    repaired: bool = False,
) -> list[DocumentRecord]:
    """``records`` (one per stitched document, in order) with their confidence and review state."""
    marked = []
    for record, part in zip(records, part_signals(answers, stitched), strict=True):
        values = dict(record.values)
        pages = range(record.first_page, record.last_page + 1)
        signals = Signals(
            doc_type=record.doc_type,
            model_confidence=part.model_confidence,
            ocr_confidences=[ocr[page] for page in pages if page in ocr],
            problems=_problems(record, check_values(values, TODAY_SPECS)),
            border=part.border,
            border_fields=part.border_fields,
            repaired=repaired or record.repaired,
        )
        marked.append(with_confidence(record, score(signals, list(values)), thresholds))
    return marked


def with_confidence(record: DocumentRecord, confidence: Confidence, thresholds: Thresholds) -> DocumentRecord:
    """``record`` scored: pending review when below its class's threshold."""
    below = confidence.below(thresholds.of(record.doc_type))
    return replace(
        record,
        confidence=confidence.score,
        review=(ReviewState.PENDING if below else ReviewState.NONE).value,
        review_reasons=list(confidence.reasons),
        field_confidence=dict(confidence.fields),
    )


def kept_layout(kept: Sequence[DocumentRecord]) -> list[StitchedDocument]:
    """A reviewed source's documents as stitched ones: what its next write slices instead of an answer."""
    return [
        StitchedDocument(
            first_page=doc.first_page,
            last_page=doc.last_page,
            type=doc.doc_type,
            values=dict(doc.values),
            fields=dict(doc.fields),
        )
        for doc in kept
    ]


def carried(records: Sequence[DocumentRecord], kept: Sequence[DocumentRecord]) -> list[DocumentRecord]:
    """New documents sliced from a reviewed layout carry its review: state, score, reasons, origin."""
    return [
        replace(
            record,
            confidence=old.confidence,
            review=old.review,
            review_reasons=list(old.review_reasons),
            field_confidence=dict(old.field_confidence),
            extra={**record.extra, "carried_from": f"{old.job_id}:{old.index} v{old.version}"},
        )
        for record, old in zip(records, kept, strict=True)
    ]


def _problems(record: DocumentRecord, own: list[FieldProblem]) -> list[FieldProblem]:
    """The classes file's findings on the record (type, format, enum, required), then review's own
    checks (an implausible date or amount) of the fields the file did not already fault."""
    faulted = {name for name, _ in record.problems}
    found = [FieldProblem(name, _code(reason), reason) for name, reason in record.problems]
    return found + [problem for problem in own if problem.name not in faulted]


def _code(reason: str) -> str:
    for code in ("required", "enum", "format", "type"):
        if code in reason:
            return code
    return "type"
