"""The coordinator's poll phase: every batch in flight it polls looked at, each on its own: every
pass in its first POLL_INTERVAL, then once a POLL_INTERVAL at most, however often passes come.

A coordinator polls the batches it created while it beats (with the settings and key that created
them, even once a newer coordinator leads); the lead also polls those whose coordinator stopped
beating (or is unknown). So each batch has one poller, and an outdated coordinator finishes its own.

A batch that ended has its results read (a cut stream is read again, keeping what arrived),
checked to be ours, filed by custom_id, and its jobs settled. A batch in flight is canceled at the
API when no live job remains in it (all canceled or ended), or when it is still running past
POLL_DEADLINE: its requests then go again in a later batch (within their tries) or fail with that
reason. An error with one batch — its results deleted or past retention, a database error while
filing it — touches that batch only.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Protocol

from raybatch.cancel import no_live_job
from raybatch.claude.batch_client import AnthropicBatchClient
from raybatch.claude.poller import poll_once
from raybatch.claude.records import BatchState, RequestResult
from raybatch.coordinator.batch_create import Io
from raybatch.coordinator.filer import ResultFiler
from raybatch.errors import AuthenticationFailed, BatchFailed, PermanentError, TransientError, error_class
from raybatch.ids import unmarked_custom_id
from raybatch.metrics import Metrics
from raybatch.models import BatchStatus, ResultType
from raybatch.retry import Backoff, retrying
from raybatch.state.port import (
    BatchRecord,
    BatchStates,
    ChunkStates,
    Coordinators,
    Flags,
    JobStates,
)

log = logging.getLogger(__name__)

RESULT_READS = 5  # tries to read one batch's results when the stream is cut
RESULT_BACKOFF = Backoff(initial=2.0, factor=2.0, cap=30.0)


class BatchPollerState(BatchStates, ChunkStates, JobStates, Flags, Coordinators, Protocol):
    """The slices of the state store that polling batches uses."""


class BatchPolls:
    """Polls batches in flight and files what ended; owned by the coordinator."""

    def __init__(
        self,
        state: BatchPollerState,
        batches: AnthropicBatchClient,
        filer: ResultFiler,
        *,
        io: Io,
        settle: Callable[[set[int]], Awaitable[None]],
        metrics: Metrics,
        deadline: float = float("inf"),
        sleep: Callable[[float], None] = time.sleep,
        coordinator_id: str | None = None,
        leads: Callable[[], bool] = lambda: True,
        look_every: float = 0.0,
    ) -> None:
        self._id = coordinator_id
        self._leads = leads  # whether this coordinator holds the lead now
        self.own_in_flight = 0  # batches it created still in flight, at the last poll
        self._sleep = sleep  # between reads of a cut result stream (on the I/O pool)
        self._deadline = deadline  # seconds a batch may stay in flight (POLL_DEADLINE)
        self._state = state
        self._batches = batches
        self._filer = filer
        self._io = io
        self._settle_jobs = settle
        self._metrics = metrics
        self._done: dict[str, float] = {}  # each batch in flight: the share of its requests done
        self._look_every = look_every  # a batch past its first this many seconds: looked at as often
        self._looked: dict[str, float] = {}  # each batch in flight: when it was last looked at

    async def poll(self) -> bool:
        """Look at every batch in flight this coordinator polls; file the results of those that
        ended. True when work moved."""
        moved = False
        active = await self._io(self._state.active_batches)
        self._metrics.batches_in_flight(len(active))
        self.own_in_flight = sum(map(self._owns, active))
        in_flight = {r.anthropic_id for r in active}
        self._looked = {k: at for k, at in self._looked.items() if k in in_flight}
        for record in await self.polled_here(active):
            if record.anthropic_id is None or record.status is BatchStatus.CREATING:
                continue
            if not self._look_due(record):
                continue
            try:
                moved = await self._poll_batch(record) or moved
            except TransientError as exc:
                log.warning("batch %s: %s; will look again", record.anthropic_id, exc)
            except AuthenticationFailed as exc:  # the key, not the batch: its answers stay ours to read
                log.error("batch %s: %s; will look again", record.anthropic_id, exc)
            except PermanentError as exc:  # deleted, past retention: this batch only is lost
                moved = await self._isolated(record, self._lose_batch(record, exc)) or moved
            except Exception:  # a database error or a bug: the other batches go on
                log.exception("batch %s: pass failed; will look again", record.anthropic_id)
        return moved

    async def polled_here(self, records: Sequence[BatchRecord]) -> list[BatchRecord]:
        """Those of ``records`` this coordinator looks after: its own; the lead's also those of no
        live coordinator."""
        lead = self._leads()
        live = set(await self._io(self._state.live_coordinators)) if lead else set()
        return [r for r in records if self._owns(r) or (lead and r.created_by not in live)]

    def _owns(self, record: BatchRecord) -> bool:
        return self._id is not None and record.created_by == self._id

    async def _isolated(self, record: BatchRecord, work: Awaitable[None]) -> bool:
        try:
            await work
        except Exception:
            log.exception("batch %s: could not be settled; will try again", record.anthropic_id)
            return False
        return True

    def _look_due(self, record: BatchRecord) -> bool:
        """A batch in its first POLL_INTERVAL is looked at every pass (a small one ends soon); an
        older one once a POLL_INTERVAL, however often passes come: each look is a call to the API,
        and a backlog's batches run for minutes or hours, many at once."""
        if _age(record) < self._look_every:
            return True
        last = self._looked.get(record.anthropic_id or "")
        return last is None or time.monotonic() - last >= self._look_every

    async def _poll_batch(self, record: BatchRecord) -> bool:
        assert record.anthropic_id is not None
        self._looked[record.anthropic_id] = time.monotonic()
        age = _age(record)
        try:
            state = await self._io(poll_once, self._batches, record.anthropic_id, age=age)
        except BatchFailed as exc:
            await self._lose_batch(record, exc)
            return True
        except TransientError as exc:
            log.warning("poll of %s failed, will poll again: %s", record.anthropic_id, exc)
            return False
        if state is None:
            return False
        if state.status is BatchStatus.ENDED:
            await self._collect(record, state, past_deadline=age >= self._deadline)
            return True
        jobs = await self._io(self._state.batch_jobs, record.id)
        self._done[record.anthropic_id] = state.done_fraction
        await self._io(self._write_progress, jobs)
        await self._io(self._state.update_batch, state.id, state.status, dict(state.counts), _raw(state))
        if state.status is BatchStatus.IN_PROGRESS:
            await self._cancel_if_unwanted(record, jobs, age)
        return False

    def _write_progress(self, job_ids: Iterable[int]) -> None:
        """Each job's progress over all its chunks: a job spread over several batches counts each.
        A job whose every chunk is answered showed 100 when it was settled."""
        progress = self._state.chunk_progress(job_ids)
        self._state.set_progress(
            {job: c.percent(self._done) for job, c in progress.items() if c.succeeded < c.total}
        )

    async def _settle_batch_jobs(self, record: BatchRecord) -> None:
        """Settle the jobs of a batch whose chunks were filed (or sent again), then show those not
        answered what is: a chunk that goes again is not done, whatever the batch's counts said."""
        self._done.pop(record.anthropic_id or "", None)  # none of its chunks is in flight any more
        jobs = set(await self._io(self._state.batch_jobs, record.id))
        await self._settle_jobs(jobs)
        await self._io(self._write_progress, jobs)

    async def _cancel_if_unwanted(self, record: BatchRecord, job_ids: Sequence[int], age: float) -> None:
        """Cancel at the API a batch no live job needs any more, or one past POLL_DEADLINE."""
        assert record.anthropic_id is not None
        if age >= self._deadline:
            reason = f"still in flight after POLL_DEADLINE ({self._deadline:.0f} s)"
        else:
            if not no_live_job(await self._io(self._state.get_jobs, job_ids)):
                return
            reason = "no live job remains in it (canceled or ended)"
        log.warning("batch %s: %s; canceling it", record.anthropic_id, reason)
        await self._io(self._batches.cancel, record.anthropic_id)

    async def _collect(self, record: BatchRecord, state: BatchState, *, past_deadline: bool = False) -> None:
        """Read an ended batch's results, file each by custom_id, then settle its jobs."""
        assert record.anthropic_id is not None
        expected = await self._io(self._state.batch_chunks, record.id)
        database = await self._io(self._state.database_id)
        results = _ours(await self._io(self._read_results, record.anthropic_id), database)
        if past_deadline:  # canceled for taking too long: the reason goes with each request
            results = [_timed_out(result, self._deadline) for result in results]
        if _foreign(results, expected):
            await self._disown(record, results)
            return
        await self._io(self._filer.file, record.anthropic_id, expected, results)
        await self._io(self._state.update_batch, state.id, BatchStatus.ENDED, dict(state.counts), _raw(state))
        self._metrics.batch_ended()
        await self._settle_batch_jobs(record)

    def _read_results(self, batch_id: str) -> list[Any]:
        """Every result of a batch; a stream cut mid-way is read again, keeping what arrived."""
        seen: dict[str, Any] = {}

        def read() -> list[Any]:
            with self._batches.results(batch_id) as stream:
                for result in stream:
                    seen.setdefault(result.custom_id, result)
            return list(seen.values())

        def again(exc: TransientError, attempt: int, waited: float) -> None:
            log.warning("results of %s cut after %d; reading again: %s", batch_id, len(seen), exc)

        return retrying(
            read, backoff=RESULT_BACKOFF, attempts=RESULT_READS, on_retry=again, sleep=self._sleep
        )

    async def _disown(self, record: BatchRecord, results: Sequence[RequestResult]) -> None:
        """An adopted batch whose results are not our requests: nothing is filed, ours go again."""
        log.error(
            "batch %s holds %d results that are not this database's requests: not filed; "
            "its intent's requests go again",
            record.anthropic_id,
            len(results),
        )
        await self._io(self._state.mark_batch_lost, record.id)
        await self._settle_batch_jobs(record)

    async def _lose_batch(self, record: BatchRecord, exc: Exception) -> None:
        """A batch the API no longer knows: its chunks go again in a later batch."""
        log.warning("batch %s lost: %s", record.anthropic_id, exc)
        expected = await self._io(self._state.batch_chunks, record.id)
        await self._io(self._filer.lose, record.anthropic_id or "", expected, error_class(exc), str(exc))
        await self._io(self._state.mark_batch_lost, record.id)
        await self._settle_batch_jobs(record)


def _timed_out(result: RequestResult, deadline: float) -> RequestResult:
    if result.type not in (ResultType.CANCELED, ResultType.EXPIRED):
        return result
    message = f"batch still in flight after POLL_DEADLINE ({deadline:.0f} s); canceled"
    return replace(result, error_type="PollDeadline", error_message=message)


def _age(record: BatchRecord) -> float:
    """Seconds since the batch was created."""
    return (datetime.now(UTC) - _aware(record.created_at)).total_seconds()


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _ours(results: Sequence[RequestResult], database_id: str) -> list[RequestResult]:
    """Results under their chunks' custom_ids (this database's mark taken off); one marked by
    another database keeps its id, which no chunk of ours has."""
    own = []
    for result in results:
        chunk_id = unmarked_custom_id(result.custom_id, database_id)
        own.append(result if chunk_id is None else replace(result, custom_id=chunk_id))
    return own


def _foreign(results: Sequence[RequestResult], expected: Sequence[str]) -> bool:
    """Results naming a request the batch never held: not our batch (or not only ours)."""
    ours = set(expected)
    return any(result.custom_id not in ours for result in results)


def _raw(state: BatchState) -> str:
    return json.dumps(dict(state.raw), default=str)
