"""The writer's uploads: documents' objects put in a few threads while the next ones are built, the
small documents of several jobs put together.

A write call builds its jobs' documents one after another on the writer's thread and hands each
document's objects here (``add``); the call does not wait for a job's uploads before building the
next job, only before that job's rows (``wait``). Documents travel in batches: a batch is sent once
it holds BATCH_BYTES or BATCH_DOCUMENTS, or when a job in it is waited for. A call of many small jobs
so costs one lease check and one put of all their objects (for a local store, two filesystem syncs)
rather than one of each per document; a large document fills a batch alone, as before.

At most ``at_once`` batches are under way (1, 2 or 4 by the source's size: ``documents_at_once``)
and one is being filled, so what is built and not yet uploaded stays bounded as it did when each
document was sent alone. The put says what refused each job of a batch: a failure stays with its job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from raybatch.models import Lease
from raybatch.objects.port import PutObject
from raybatch.steps.deal import GROUP_JOBS
from raybatch.units import MIB

MOST_AT_ONCE = 4  # the pool's threads: the most batches under way
# A batch is sent once its documents hold BATCH_BYTES (so a scanned document, a megabyte or more,
# is put alone while the next is built, as before) or BATCH_DOCUMENTS: a whole write call of small
# jobs, in one batch (smaller batches put beside the build took turns with it for Python's lock,
# and each added its syncs: slower, docs/benchmarks.md).
BATCH_BYTES = MIB
BATCH_DOCUMENTS = GROUP_JOBS


@dataclass(frozen=True)
class Upload:
    """One document's objects, to be put under its job's lease."""

    lease: Lease
    objects: Sequence[PutObject]

    @property
    def job_id(self) -> int:
        return self.lease.job_id

    @property
    def size(self) -> int:
        """Bytes held until it is put."""
        return sum(len(one.data) for one in self.objects)


# Puts a batch of documents (of one job or several); what refused each job whose objects it did not put.
Put = Callable[[Sequence[Upload]], Mapping[int, Exception]]


class UploadPool:
    """Uploads by job, in batches, run in a few threads made on first use."""

    def __init__(
        self,
        put: Put,
        threads: int = MOST_AT_ONCE,
        batch_bytes: int = BATCH_BYTES,
        batch_documents: int = BATCH_DOCUMENTS,
    ) -> None:
        self._put = put
        self._threads = threads
        self._batch_bytes, self._batch_documents = batch_bytes, batch_documents
        self._executor: ThreadPoolExecutor | None = None
        self._filling: list[Upload] = []
        self._filling_bytes = 0
        self._at_once = threads
        self._pending: dict[int, list[Future[Mapping[int, Exception]]]] = {}

    def add(self, upload: Upload, at_once: int) -> None:
        """Put ``upload`` with the next batch; at most ``at_once`` batches under way meanwhile."""
        self._filling.append(upload)
        self._filling_bytes += upload.size
        self._at_once = min(self._at_once, max(1, at_once))
        if self._filling_bytes >= self._batch_bytes or len(self._filling) >= self._batch_documents:
            self._send()

    def wait(self, job_id: int) -> None:
        """Until every upload of ``job_id`` ended (its batch sent first if still filling); raises
        what refused the job."""
        if any(one.job_id == job_id for one in self._filling):
            self._send()
        pending = self._pending.pop(job_id, [])
        futures.wait(pending)
        for future in pending:
            refused = future.result().get(job_id)
            if refused is not None:
                raise refused

    def drop(self, job_id: int) -> None:
        """A failed job's documents not yet sent are not sent; until its uploads under way ended."""
        self._filling = [one for one in self._filling if one.job_id != job_id]
        self._filling_bytes = sum(one.size for one in self._filling)
        futures.wait(self._pending.pop(job_id, []))

    def settle_all(self) -> None:
        """Until every upload under way ended, what is still filling not sent and failures dropped
        (a call's end: each job that met one was told by ``wait`` already, or is failing for another
        cause)."""
        self._filling, self._filling_bytes, self._at_once = [], 0, self._threads
        pending, self._pending = self._pending, {}
        futures.wait({f for jobs in pending.values() for f in jobs})

    def _send(self) -> None:
        batch, self._filling, self._filling_bytes = self._filling, [], 0
        at_once, self._at_once = self._at_once, self._threads
        running = {f for jobs in self._pending.values() for f in jobs if not f.done()}
        while len(running) >= min(at_once, self._threads):
            done, _ = futures.wait(running, return_when=futures.FIRST_COMPLETED)
            running -= done
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="write")
        future = self._executor.submit(_refusals, self._put, batch)
        for job_id in dict.fromkeys(one.job_id for one in batch):
            self._pending.setdefault(job_id, []).append(future)


def _refusals(put: Put, batch: Sequence[Upload]) -> Mapping[int, Exception]:
    """What refused each job of the batch; should the put itself raise, every job of it met that."""
    try:
        return put(batch)
    except Exception as exc:
        return dict.fromkeys((one.job_id for one in batch), exc)
