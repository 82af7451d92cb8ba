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
from raybatch.state.port import JobsWithChunks
from raybatch.steps.parse import read_answer

log = logging.getLogger(__name__)

_SETTLED_FROM = (JobStatus.SUBMITTED, JobStatus.PREPARED)


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
        """File one batch's (or one sync run's) results; returns how many changed a chunk."""
        report = file_results(results, expected)
        if report.duplicates:
            log.info("batch %s: %d duplicate results ignored", batch_id, len(report.duplicates))
        chunks = self._chunks_by_id(report.accepted)
        accepted = report.accepted.items()
        changed = sum(self._file_one(batch_id, filed, chunks.get(cid)) for cid, filed in accepted)
        for cid in report.missing:
            changed += self._again(batch_id, cid, "missing", "no result in the batch")
        return changed

    def lose(self, batch_id: str, expected: Sequence[str], error: str, message: str) -> int:
        """Every chunk of a lost batch goes again in a later one (within its attempts)."""
        return sum(self._again(batch_id, cid, error, message) for cid in expected)

    def settle_all(self, job_ids: Iterable[int]) -> dict[int, JobStatus | None]:
        """``settle`` for each of these jobs, their chunks read in one query."""
        chunks = self._state.chunks_of(job_ids)
        return {job_id: self._settle(job_id, chunks[job_id]) for job_id in sorted(chunks)}

    def settle(self, job_id: int) -> JobStatus | None:
        """Answered when every chunk succeeded, failed when one failed, prepared again to retry."""
        return self._settle(job_id, self._state.get_chunks(job_id))

    def _settle(self, job_id: int, chunks: Sequence[ChunkRecord]) -> JobStatus | None:
        if not chunks:
            return None
        statuses = {c.status for c in chunks}
        if ChunkStatus.FAILED in statuses:
            failed = next(c for c in chunks if c.status is ChunkStatus.FAILED)
            reason = f"chunk {failed.n}: {failed.error_message or 'failed'}"
            self._state.fail_job(job_id, "claude", failed.error_class or "BatchFailed", reason)
            return JobStatus.FAILED
        if statuses == {ChunkStatus.SUCCEEDED}:
            moved = self._state.transition(job_id, _SETTLED_FROM, JobStatus.ANSWERED, progress=100.0)
            return JobStatus.ANSWERED if moved else None
        if ChunkStatus.SUBMITTED not in statuses:
            moved = self._state.transition(job_id, [JobStatus.SUBMITTED], JobStatus.PREPARED)
            return JobStatus.PREPARED if moved else None
        if ChunkStatus.PREPARED not in statuses and ChunkStatus.RETRY not in statuses:
            self._state.transition(job_id, [JobStatus.PREPARED], JobStatus.SUBMITTED)
            return JobStatus.SUBMITTED
        return None

    def _chunks_by_id(self, custom_ids: Iterable[str]) -> dict[str, ChunkRecord]:
        jobs = {ids[0] for cid in custom_ids if (ids := parse_custom_id(cid))}
        return {c.custom_id: c for chunks in self._state.chunks_of(jobs).values() for c in chunks}

    def _file_one(self, batch_id: str, filed: Filed, chunk: ChunkRecord | None) -> int:
        result = filed.result
        if filed.action is FilingAction.FAIL:
            return self._record(batch_id, result, retry=False, error=result.error_type, message=filed.reason)
        if filed.action is FilingAction.RETRY:
            return self._record(batch_id, result, retry=True, error=result.error_type, message=filed.reason)
        if chunk is None:
            log.warning("result for %s has no chunk row; rejected", result.custom_id)
            return 0
        if result.stop_reason == "max_tokens":  # never filed as complete: asked again, larger
            return self._retry(batch_id, result, MAX_TOKENS_ERROR, CUT_SHORT)
        try:
            parsed = read_answer(result.text or "", first_page=chunk.first_page, last_page=chunk.last_page)
        except UnparseableAnswer as exc:
            self._metrics.answer_unparseable()
            return self._retry(batch_id, result, "UnparseableAnswer", str(exc))
        if parsed.repaired:
            log.info("%s: answer repaired (%s)", result.custom_id, ", ".join(parsed.repairs))
        filed_ok = self._state.file_result(
            result.custom_id,
            batch_id,
            ResultType.SUCCEEDED,
            answer=parsed.answer.model_dump_json(),
            usage=result.usage,
        )
        if filed_ok and result.usage is not None:
            self._metrics.tokens(result.usage, mode=sent_mode_of(batch_id), prices=self._prices)
        return int(filed_ok)

    def _again(self, batch_id: str, custom_id: str, error: str, message: str) -> int:
        """A request with no answer (missing, its batch lost): asked again."""
        return self._retry(
            batch_id, RequestResult(custom_id=custom_id, type=ResultType.ERRORED), error, message
        )

    def _retry(self, batch_id: str, answered: RequestResult, error: str, message: str) -> int:
        """An answer that came back and cannot be kept: asked again, its tokens counted."""
        errored = RequestResult(custom_id=answered.custom_id, type=ResultType.ERRORED, usage=answered.usage)
        return self._record(batch_id, errored, retry=True, error=error, message=message)

    def _record(
        self, batch_id: str, result: RequestResult, *, retry: bool, error: str | None, message: str
    ) -> int:
        return int(
            self._state.file_result(
                result.custom_id,
                batch_id,
                result.type,
                usage=result.usage,
                error_class=error or result.type.value,
                error_message=message or (result.error_message or result.type.value),
                retry=retry,
                max_attempts=self._max_attempts,
            )
        )
