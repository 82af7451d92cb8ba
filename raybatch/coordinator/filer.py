"""Filing results into the state store, and settling a job by its chunks.

Shared by batch and synchronous results, so both are filed the same way. An answer is parsed when
it is filed: a malformed one is repaired once, else the chunk goes again like a transient error.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from raybatch.claude.records import RequestResult
from raybatch.claude.triage import Filed, FilingAction, file_results
from raybatch.coordinator.answer_budget import CUT_SHORT, MAX_TOKENS_ERROR
from raybatch.cost import ModelPrices, prices_for
from raybatch.errors import UnparseableAnswer
from raybatch.ids import parse_custom_id
from raybatch.metrics import Metrics
from raybatch.models import ChunkRecord, ChunkStatus, JobStatus, ResultType, sent_mode_of
from raybatch.settings import DEFAULT_MODEL
from raybatch.state.port import ChunkResult, JobsWithChunks
from raybatch.steps.parse import read_answer

log = logging.getLogger(__name__)

_SETTLED_FROM = (JobStatus.SUBMITTED, JobStatus.PREPARED)
# Each move settling makes: the statuses it is conditional on, and the fields it sets.
_MOVES: dict[JobStatus, tuple[tuple[JobStatus, ...], dict[str, float]]] = {
    JobStatus.ANSWERED: (_SETTLED_FROM, {"progress": 100.0}),
    JobStatus.PREPARED: ((JobStatus.SUBMITTED,), {}),
    JobStatus.SUBMITTED: ((JobStatus.PREPARED,), {}),
}


class ResultFiler:
    """Files results by custom_id and moves jobs on once their chunks allow it."""

    def __init__(
        self,
        state: JobsWithChunks,
        *,
        max_attempts: int,
        metrics: Metrics | None = None,
        prices: ModelPrices | None = None,
    ) -> None:
        self._state = state
        self._prices = prices or prices_for(DEFAULT_MODEL)
        self._max_attempts = max_attempts
        self._metrics = metrics or Metrics()

    def file(self, batch_id: str, expected: Sequence[str], results: Iterable[RequestResult]) -> int:
        """File one batch's (or one sync run's) results in one transaction; returns how many changed
        a chunk."""
        report = file_results(results, expected)
        if report.duplicates:
            log.info("batch %s: %d duplicate results ignored", batch_id, len(report.duplicates))
        chunks = self._chunks_by_id(report.accepted)
        filings = [self._filing(filed, chunks.get(cid)) for cid, filed in report.accepted.items()]
        filings += [_again(cid, "missing", "no result in the batch") for cid in report.missing]
        return self._store(batch_id, [f for f in filings if f is not None])

    def lose(self, batch_id: str, expected: Sequence[str], error: str, message: str) -> int:
        """Every chunk of a lost batch goes again in a later one (within its attempts)."""
        return self._store(batch_id, [_again(cid, error, message) for cid in expected])

    def settle_all(self, job_ids: Iterable[int]) -> dict[int, JobStatus | None]:
        """``settle`` for each of these jobs: their chunks read in one query, and the jobs that
        move the same way moved by one conditional UPDATE (a job canceled meanwhile stays so)."""
        chunks = self._state.chunks_of(job_ids)
        outcomes: dict[int, JobStatus | None] = {}
        moves: dict[JobStatus, list[int]] = {}
        for job_id in sorted(chunks):
            outcome = _outcome(chunks[job_id])
            if isinstance(outcome, ChunkRecord):  # one chunk failed: the job fails with its reason
                reason = f"chunk {outcome.n}: {outcome.error_message or 'failed'}"
                self._state.fail_job(job_id, "claude", outcome.error_class or "BatchFailed", reason)
                outcomes[job_id] = JobStatus.FAILED
            elif outcome is None:
                outcomes[job_id] = None
            else:
                moves.setdefault(outcome, []).append(job_id)
        for to_status, ids in moves.items():
            from_statuses, fields = _MOVES[to_status]
            moved = self._state.transition_jobs(ids, from_statuses, to_status, **fields)
            # A job that was not prepared still counts as submitted, as it was.
            for job_id in ids:
                kept = job_id in moved or to_status is JobStatus.SUBMITTED
                outcomes[job_id] = to_status if kept else None
        return outcomes

    def settle(self, job_id: int) -> JobStatus | None:
        """Answered when every chunk succeeded, failed when one failed, prepared again to retry."""
        return self.settle_all([job_id]).get(job_id)

    def _chunks_by_id(self, custom_ids: Iterable[str]) -> dict[str, ChunkRecord]:
        jobs = {ids[0] for cid in custom_ids if (ids := parse_custom_id(cid))}
        return {c.custom_id: c for chunks in self._state.chunks_of(jobs).values() for c in chunks}

    def _filing(self, filed: Filed, chunk: ChunkRecord | None) -> ChunkResult | None:
        """What filing one accepted result writes (None: rejected); its answer parsed here."""
        result = filed.result
        if filed.action is not FilingAction.SUCCEED:
            retry = filed.action is FilingAction.RETRY
            return _errored(result, retry=retry, error=result.error_type, message=filed.reason)
        if chunk is None:
            log.warning("result for %s has no chunk row; rejected", result.custom_id)
            return None
        if result.stop_reason == "max_tokens":  # never filed as complete: asked again, larger
            return _unusable(result, MAX_TOKENS_ERROR, CUT_SHORT)
        try:
            parsed = read_answer(result.text or "", first_page=chunk.first_page, last_page=chunk.last_page)
        except UnparseableAnswer as exc:
            self._metrics.answer_unparseable()
            return _unusable(result, "UnparseableAnswer", str(exc))
        if parsed.repaired:
            log.info("%s: answer repaired (%s)", result.custom_id, ", ".join(parsed.repairs))
        answer = parsed.answer.model_dump_json()
        return ChunkResult(result.custom_id, ResultType.SUCCEEDED, answer=answer, usage=result.usage)

    def _store(self, batch_id: str, filings: Sequence[ChunkResult]) -> int:
        """File ``filings`` at once; the tokens of the answers kept counted."""
        if not filings:
            return 0
        filed = self._state.file_results(batch_id, filings, max_attempts=self._max_attempts)
        mode = sent_mode_of(batch_id)
        for filing in filings:
            if (
                filing.custom_id in filed
                and filing.result is ResultType.SUCCEEDED
                and filing.usage is not None
            ):
                self._metrics.tokens(filing.usage, mode=mode, prices=self._prices)
        return len(filed)


def _outcome(chunks: Sequence[ChunkRecord]) -> ChunkRecord | JobStatus | None:
    """Where a job's chunks move it: its first failed chunk (it fails), answered when every chunk
    succeeded, prepared again when none is in flight, submitted once none waits; None: it waits."""
    if not chunks:
        return None
    statuses = {c.status for c in chunks}
    if ChunkStatus.FAILED in statuses:
        return next(c for c in chunks if c.status is ChunkStatus.FAILED)
    if statuses == {ChunkStatus.SUCCEEDED}:
        return JobStatus.ANSWERED
    if ChunkStatus.SUBMITTED not in statuses:
        return JobStatus.PREPARED
    if ChunkStatus.PREPARED not in statuses and ChunkStatus.RETRY not in statuses:
        return JobStatus.SUBMITTED
    return None


def _errored(result: RequestResult, *, retry: bool, error: str | None, message: str) -> ChunkResult:
    """An error filed for its chunk: asked again (within its tries) with ``retry``, else failed."""
    return ChunkResult(
        result.custom_id,
        result.type,
        usage=result.usage,
        error_class=error or result.type.value,
        error_message=message or (result.error_message or result.type.value),
        retry=retry,
    )


def _again(custom_id: str, error: str, message: str) -> ChunkResult:
    """A request with no answer (missing, its batch lost): asked again."""
    return _unusable(RequestResult(custom_id=custom_id, type=ResultType.ERRORED), error, message)


def _unusable(answered: RequestResult, error: str, message: str) -> ChunkResult:
    """An answer that came back and cannot be kept: asked again, its tokens counted."""
    errored = RequestResult(custom_id=answered.custom_id, type=ResultType.ERRORED, usage=answered.usage)
    return _errored(errored, retry=True, error=error, message=message)
