"""Register: one job per source file, deduplicated by sha256; bad files fail their own job at once.

Reading a file to hash it is also the cheapest moment to open it: its kind and page count are
recorded, and an encrypted, corrupt or empty file ends as a failed job with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from raybatch.errors import InvalidSource, RaybatchError, error_class
from raybatch.ids import sha256_bytes
from raybatch.models import JobRecord, JobStatus, SourceKind
from raybatch.settings import StoreSettings
from raybatch.sources import SourceFile, read_source
from raybatch.state.port import StateStore
from raybatch.steps.source import detect_kind, open_source

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Registration:
    """The job a file became, and whether this call made it."""

    source: SourceFile
    job: JobRecord
    created: bool


@dataclass(frozen=True)
class Registrar:
    """Registers source files as jobs."""

    state: StateStore
    sources: StoreSettings
    max_page_pixels: int
    mode: str = "batch"
    force: bool = False

    def register_all(
        self,
        files: Sequence[SourceFile],
        *,
        threads: int = 4,
        on_done: Callable[[Registration], None] | None = None,
    ) -> list[Registration]:
        """Register every file (reading and hashing in a few threads), in the order given."""
        with ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="register") as pool:
            done: list[Registration] = []
            for registration in pool.map(self.register, files):
                done.append(registration)
                if on_done is not None:
                    on_done(registration)
        return done

    def register(self, source: SourceFile) -> Registration:
        """Register one file; a file that cannot be read becomes a failed job named by its URI."""
        try:
            data = read_source(source.uri, self.sources)
        except InvalidSource as exc:
            return self._unreadable(source, exc)
        job, created = self.state.register_job(
            sha256=sha256_bytes(data),
            source_uri=source.uri,
            source_name=source.name,
            kind=_kind_or_pdf(data),
            size_bytes=len(data),
            mode=self.mode,
            force=self.force,
        )
        if job.status is JobStatus.PENDING:
            job = self._inspect(job, data)
        return Registration(source, job, created)

    def _inspect(self, job: JobRecord, data: bytes) -> JobRecord:
        """Record the page count and the mode asked for; fail the job if the file is unusable."""
        try:
            kind = detect_kind(data)
            with open_source(data, kind, max_page_pixels=self.max_page_pixels) as doc:
                pages = doc.page_count
        except InvalidSource as exc:
            self.state.fail_job(job.id, "register", error_class(exc), str(exc))
            log.warning("job %d (%s) failed: %s", job.id, job.source_name, exc)
            return self.state.get_job(job.id)
        self.state.transition(job.id, [JobStatus.PENDING], JobStatus.PENDING, pages=pages, mode=self.mode)
        return self.state.get_job(job.id)

    def _unreadable(self, source: SourceFile, exc: RaybatchError) -> Registration:
        # No bytes, no content hash: the job is keyed by the URI so a rerun finds the same one.
        job, created = self.state.register_job(
            sha256=sha256_bytes(f"unreadable:{source.uri}".encode()),
            source_uri=source.uri,
            source_name=source.name,
            kind=SourceKind.PDF,
            size_bytes=source.size,
            mode=self.mode,
        )
        self.state.fail_job(job.id, "register", error_class(exc), str(exc))
        return Registration(source, self.state.get_job(job.id), created)


def _kind_or_pdf(data: bytes) -> SourceKind:
    try:
        return detect_kind(data)
    except InvalidSource:
        return SourceKind.PDF  # the job fails in _inspect with the reason
