"""File a batch's results by custom_id: which chunks succeeded, go again later, or failed for good.

Results come in any order. The first result for an expected custom_id counts; repeats are reported
as duplicates and ignored; ids the batch never held are rejected and logged. Errored results split
by error type: ``invalid_request_error`` is the request's own fault (fail); anything else — api_error,
overloaded_error, rate limits, unknown types — may pass in a later batch (retry), as do expired and
canceled results, a success without text, and an expected id with no result at all (``missing``).
How many tries a chunk gets is the state store's business (``max_attempts``), not this module's.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from raybatch.claude.records import RequestResult
from raybatch.models import ResultType

log = logging.getLogger(__name__)

PERMANENT_ERROR_TYPES = frozenset({"invalid_request_error"})


class FilingAction(StrEnum):
    """What to do with a chunk after its result."""

    SUCCEED = "succeed"
    RETRY = "retry"
    FAIL = "fail"


@dataclass(frozen=True)
class Filed:
    """One expected request's result and what it means; ``reason`` is empty on success."""

    result: RequestResult
    action: FilingAction
    reason: str = ""


@dataclass(frozen=True)
class FilingReport:
    """A batch's results sorted out: accepted by custom_id, plus what did not belong."""

    accepted: dict[str, Filed] = field(default_factory=dict)
    duplicates: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def with_action(self, action: FilingAction) -> list[str]:
        """custom_ids whose action is ``action``, in the order their results arrived."""
        return [cid for cid, filed in self.accepted.items() if filed.action is action]


def file_results(results: Iterable[RequestResult], expected: Collection[str]) -> FilingReport:
    """Match ``results`` to the ``expected`` custom_ids of one batch and classify each."""
    wanted = set(expected)
    report = FilingReport()
    for result in results:
        if result.custom_id not in wanted:
            log.warning("result for unknown custom_id %r rejected", result.custom_id[:80])
            report.unknown.append(result.custom_id)
        elif result.custom_id in report.accepted:
            report.duplicates.append(result.custom_id)
        else:
            report.accepted[result.custom_id] = classify(result)
    report.missing.extend(sorted(wanted - report.accepted.keys()))
    if report.missing:
        log.warning("%d expected results missing from the batch; they will be retried", len(report.missing))
    return report


def classify(result: RequestResult) -> Filed:
    """What one result means for its chunk."""
    if result.type == ResultType.SUCCEEDED:
        if result.text is None or not result.text.strip():
            return Filed(result, FilingAction.RETRY, "succeeded without answer text")
        return Filed(result, FilingAction.SUCCEED)
    if result.type == ResultType.ERRORED:
        error_type = result.error_type or "unknown_error"
        action = FilingAction.FAIL if error_type in PERMANENT_ERROR_TYPES else FilingAction.RETRY
        return Filed(result, action, f"errored: {error_type}")
    return Filed(result, FilingAction.RETRY, result.error_message or str(result.type))
