"""The writer's uploads: a pool of threads putting documents' objects while the next ones are built.

A write call builds its jobs' documents one after another on the writer's thread and hands each
document's objects here; the call does not wait for a job's uploads before building the next job,
only before that job's rows (``wait``). At most ``at_once`` documents are built and not yet uploaded
at any time, over every job of the call (1, 2 or 4 by the source's size: ``documents_at_once``), so
memory stays bounded as it did when each job waited for its own.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

MOST_AT_ONCE = 4  # the pool's threads: the most documents built and not yet uploaded


class UploadPool:
    """Uploads by job, run in a few threads made on first use."""

    def __init__(self, threads: int = MOST_AT_ONCE) -> None:
        self._threads = threads
        self._executor: ThreadPoolExecutor | None = None
        self._pending: dict[int, list[Future[Any]]] = {}

    def submit(self, job_id: int, at_once: int, upload: Callable[..., Any], *args: Any) -> None:
        """Run ``upload(*args)`` for ``job_id`` once fewer than ``at_once`` uploads are under way."""
        running = [f for jobs in self._pending.values() for f in jobs if not f.done()]
        while len(running) >= max(1, min(at_once, self._threads)):
            done, _ = futures.wait(running, return_when=futures.FIRST_COMPLETED)
            running = [f for f in running if f not in done]
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="write")
        self._pending.setdefault(job_id, []).append(self._executor.submit(upload, *args))

    def wait(self, job_id: int) -> None:
        """Until every upload of ``job_id`` ended; raises the first one's failure."""
        pending = self._pending.pop(job_id, [])
        futures.wait(pending)
        for future in pending:
            future.result()

    def settle_all(self) -> None:
        """Until every upload ended, their failures dropped (a call's end: each job that met one
        was told by ``wait`` already, or is failing for another cause)."""
        pending, self._pending = self._pending, {}
        futures.wait([f for jobs in pending.values() for f in jobs])
