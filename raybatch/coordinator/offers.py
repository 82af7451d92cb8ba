"""The coordinator's offered jobs: their prepared payloads, held until each job is answered or failed,
and whether new work may be sent at all (parked by the spend cap or an outage, stopped by a rejected
key). Settling and failing jobs lives here, since both let go of a job's payloads."""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from raybatch.coordinator.batch_create import Io
from raybatch.coordinator.filer import ResultFiler
from raybatch.errors import AuthenticationFailed, error_class
from raybatch.models import JobStatus, ProcessingMode
from raybatch.state.port import StateStore

log = logging.getLogger(__name__)
_SETTLED = (JobStatus.ANSWERED, JobStatus.FAILED)  # a job settled so lets go of its payloads
# How often a submit pass looks at every offer held (``Offers.to_look_at``): what another path did to
# one (sent it back, canceled it, made it urgent) is found within this many seconds.
LOOK_AT_ALL_SECONDS = 5.0


@dataclass(frozen=True)
class Offer:
    """A job's prepared chunks: chunk number → a handle that resolves to a PreparedRequest."""

    job_id: int
    chunks: Mapping[int, Any]
    mode: ProcessingMode
    request_bytes: int


class Offers:
    """Offered jobs by id, the time the oldest unsent one came, and the flush, park and stop flags."""

    def __init__(
        self,
        state: StateStore,
        filer: ResultFiler,
        *,
        io: Io,
        park_seconds: float,
        monotonic: Callable[[], float],
    ) -> None:
        self._state = state
        self._filer = filer
        self._io = io
        self._park_seconds = park_seconds
        self._monotonic = monotonic
        self.by_job: dict[int, Offer] = {}
        self.unsent: dict[int, int] = {}  # request bytes of the offers not known to be sent yet
        self._looked_at_all = -LOOK_AT_ALL_SECONDS
        self.first_at: float | None = None  # when the oldest offer not yet in a batch came
        self.batch_at: float | None = None  # when this coordinator last created a batch
        self.flush = False  # the driver says no more work is coming soon
        self.parked_until = 0.0
        self.stopped: str | None = None  # why no work can be sent at all (credentials rejected)

    def add(self, offer: Offer) -> None:
        """Hold ``offer`` (a second offer of a job replaces the first)."""
        self.by_job[offer.job_id] = offer
        self.unsent[offer.job_id] = offer.request_bytes
        if self.first_at is None:
            self.first_at = self._monotonic()

    def forget(self, job_ids: Sequence[int]) -> None:
        """Let go of the payloads of ``job_ids``."""
        for job_id in job_ids:
            self.by_job.pop(job_id, None)
            self.unsent.pop(job_id, None)

    def sent(self, job_ids: Iterable[int]) -> None:
        """These jobs are sent (or no longer wait to be): they no longer make a batch due."""
        for job_id in job_ids:
            self.unsent.pop(job_id, None)

    def waiting(self, job_ids: Iterable[int]) -> None:
        """These offered jobs wait to be sent (again): they count for a batch and its backlog."""
        for job_id in job_ids:
            if job_id in self.by_job:
                self.unsent[job_id] = self.by_job[job_id].request_bytes

    def to_look_at(self, taken: int) -> list[int]:
        """The offers a submit pass that takes ``taken`` jobs asks the database about: the synchronous
        ones and the oldest 2 x ``taken`` others not known to be sent; every one held once in
        LOOK_AT_ALL_SECONDS."""
        now = self._monotonic()
        if now - self._looked_at_all >= LOOK_AT_ALL_SECONDS:
            self._looked_at_all = now
            return list(self.by_job)
        sync = {i for i in self.unsent if self.by_job[i].mode == ProcessingMode.SYNC}
        return [*sync, *heapq.nsmallest(2 * taken, (i for i in self.unsent if i not in sync))]

    def batch_due(self, batch_size: int, max_jobs: int, max_bytes: int, spacing: float) -> bool:
        """Whether what waits may make a batch now (the submit phase checks with the database): the
        driver flushes, a full batch waits, or ``batch_size`` jobs wait and no batch went out in the
        last ``spacing`` seconds."""
        if self.flush or len(self.unsent) >= max_jobs or sum(self.unsent.values()) >= max_bytes:
            return True
        return len(self.unsent) >= batch_size and self.spaced(spacing)

    def spaced(self, seconds: float) -> bool:
        """No batch of this coordinator's went out in the last ``seconds``."""
        return self.batch_at is None or self._monotonic() - self.batch_at >= seconds

    @property
    def parked(self) -> bool:
        """New work waits (spend cap reached, or the API stayed down past its budget)."""
        return self._monotonic() < self.parked_until

    def park(self, reason: str) -> None:
        """Send no new work for PARK_SECONDS."""
        seconds = self._park_seconds
        log.warning("%s: new work parked for %.0f s", reason, seconds)
        self.parked_until = self._monotonic() + seconds

    async def settle(self, job_ids: set[int]) -> None:
        """Move each job on by its chunks: answered, failed, back to prepared for a retry, or wait."""
        outcomes = await self._io(self._filer.settle_all, job_ids)  # their chunks read at once
        self.forget([job_id for job_id, outcome in outcomes.items() if outcome in _SETTLED])
        self.waiting(job_id for job_id, outcome in outcomes.items() if outcome is JobStatus.PREPARED)

    async def fail_jobs(self, job_ids: set[int], exc: BaseException) -> None:
        """Fail ``job_ids`` with ``exc``; a rejected key also stops all sending."""
        if isinstance(exc, AuthenticationFailed) and self.stopped is None:
            self.stopped = f"Claude rejected the credentials; set ANTHROPIC_API_KEY and run again ({exc})"
            log.error("%s", self.stopped)
            exc = AuthenticationFailed(self.stopped)
        for job_id in sorted(job_ids):
            await self._io(self._state.fail_job, job_id, "claude", error_class(exc), str(exc))
            self.forget([job_id])
