"""Synchronous (urgent) calls of the coordinator: sent off the loop, filed, never lost.

Chunks carry their coordinator's tag (``sync:<coordinator>``) while their call is under way.
Each answer is saved to the database as it arrives, before the call's other answers and before its
jobs are settled: a coordinator killed after that loses nothing. An answer whose saving failed (the
database away) is written to the spool (``spool``: the object store) at once, kept in memory and
filed on the next pass, its chunk marked live meanwhile, so no sweep sends it again (it is paid); a
coordinator killed before that pass leaves it in the spool, which every coordinator files at start
and the lead before it releases any call. Rejected credentials partway through keep the answers
already returned: only the requests left unanswered are released, and their jobs failed. Anything a
call could not finish is released: its chunks go back to prepared, to be sent again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from raybatch.claude.records import PreparedRequest, RequestResult
from raybatch.claude.sync_client import AnthropicMessageClient
from raybatch.coordinator.batch_create import Io
from raybatch.coordinator.filer import ResultFiler
from raybatch.coordinator.spool import AnswerSpool
from raybatch.errors import PermanentError
from raybatch.models import SYNC_BATCH_ID, ResultType
from raybatch.state.port import ChunkStates, JobStates

log = logging.getLogger(__name__)

SYNC_BATCH = SYNC_BATCH_ID  # the batch id chunks carry while a synchronous call is under way


class SyncCallState(ChunkStates, JobStates, Protocol):
    """The slices of the state store that synchronous calls use."""


@dataclass(frozen=True)
class _Answers:
    """One call's answers, waiting to be filed."""

    sent: list[str]
    results: list[RequestResult]
    jobs: set[int]


class SyncCalls:
    """Runs synchronous calls as tasks and files their answers; owned by the coordinator."""

    def __init__(
        self,
        state: SyncCallState,
        messages: AnthropicMessageClient,
        filer: ResultFiler,
        *,
        io: Io,
        settle: Callable[[set[int]], Awaitable[None]],
        on_permanent: Callable[[set[int], PermanentError], Awaitable[None]],
        on_parked: Callable[[str], None],
        tag: str = SYNC_BATCH,
        call_io: Io | None = None,
        spool: AnswerSpool | None = None,
    ) -> None:
        self.tag = tag  # this coordinator's batch id for its calls' chunks
        self._state = state
        self._messages = messages
        self._filer = filer
        self._io = io
        self._call_io = call_io or io  # where a call waits for its answers: not the database's threads
        self._settle = settle
        self._on_permanent = on_permanent
        self._on_parked = on_parked
        self._spool = spool  # None: an answer the database refused waits in memory only
        self._spooled: set[str] = set()  # custom_ids this coordinator wrote to the spool, not yet dropped
        self._spool_read = spool is None  # the spool was filed once since this coordinator started
        self.live: set[str] = set()  # custom_ids sent or answered but not filed yet
        self.tasks: set[asyncio.Task[None]] = set()
        self._unfiled: list[_Answers] = []
        self._filing = asyncio.Lock()

    async def start(self, requests: Sequence[PreparedRequest]) -> None:
        """Mark the chunks as under way and send them on a task."""
        ids = [r.custom_id for r in requests]
        await self._io(self._state.mark_chunks_submitted, ids, self.tag)
        self.live.update(ids)
        task = asyncio.get_running_loop().create_task(self._run(list(requests)), name="sync-call")
        self.tasks.add(task)
        task.add_done_callback(self._done)

    async def file_pending(self) -> None:
        """File answers kept because filing failed before (the spool too, once, at start: a
        restarted coordinator that does not lead files its own); stops at the first failure."""
        if not self._spool_read:
            try:
                await self.file_spooled()
            except Exception as exc:  # the store or the database: the next pass tries again
                log.warning("filing the answer spool failed, will try again: %s", exc)
            else:
                self._spool_read = True
        async with self._filing:
            while self._unfiled:
                answers = self._unfiled[0]
                try:
                    await self._io(self._filer.file, self.tag, answers.sent, answers.results)
                    await self._settle(answers.jobs)
                except Exception as exc:  # the database: the answers wait in memory for the next pass
                    count = len(answers.sent)
                    log.warning("filing %d synchronous answers failed, will try again: %s", count, exc)
                    return
                self._unfiled.pop(0)
                self.live.difference_update(answers.sent)
                await self._unspool(answers.sent)

    async def file_spooled(self) -> None:
        """File every answer the spool holds (this coordinator's, or one's that was killed), settle
        their jobs, then drop them. Raises when the spool or the database fails: the caller then
        releases nothing, so no spooled chunk is sent again."""
        if self._spool is None:
            return
        async with self._filing:
            entries = await self._io(self._spool.read)
            if not entries:
                return
            by_tag: dict[str, list[RequestResult]] = {}
            for entry in entries:
                by_tag.setdefault(entry.batch_id, []).append(entry.result)
            for tag, results in by_tag.items():  # idempotent: only chunks still SUBMITTED under tag change
                await self._io(self._filer.file, tag, [r.custom_id for r in results], results)
            await self._settle({entry.job_id for entry in entries})
            filed = [entry.result.custom_id for entry in entries]
            await self._io(self._spool.drop, filed)
        log.info("%d spooled synchronous answers filed", len(filed))
        self._spooled.difference_update(filed)
        self.live.difference_update(filed)

    async def _unspool(self, custom_ids: Sequence[str]) -> None:
        """Drop the spool's copies of answers now filed; one left behind is filed again, a no-op."""
        spooled = [cid for cid in custom_ids if cid in self._spooled]
        if not spooled or self._spool is None:
            return
        try:
            await self._io(self._spool.drop, spooled)
        except Exception as exc:
            log.warning("%d spooled answers filed but not dropped: %s", len(spooled), exc)
            return
        self._spooled.difference_update(spooled)

    async def _run(self, requests: list[PreparedRequest]) -> None:
        ids = [r.custom_id for r in requests]
        jobs = {r.job_id for r in requests}
        saved: set[str] = set()  # answers filed as they arrived
        unsaved: dict[str, RequestResult] = {}  # answers whose filing failed: spooled, filed later
        try:
            outcome = await self._call_io(
                self._messages.send, requests, on_result=self._on_result(requests, saved, unsaved)
            )
        except Exception as exc:
            await self._cut_short(ids, jobs, saved, unsaved, exc)
            return
        if outcome.parked:  # never sent: back to prepared, no try counted
            await self._release(outcome.parked)
            self._on_parked("spend limit reached")
        if outcome.refused:
            await self._release(outcome.refused)
        self.live.difference_update(saved)
        unsent = set(outcome.parked) | set(outcome.refused) | saved
        rest = [r for r in outcome.results if r.custom_id not in saved]
        self._unfiled.append(_Answers([cid for cid in ids if cid not in unsent], rest, jobs))
        await self.file_pending()
        if outcome.rejected is not None:  # the jobs left unanswered fail; the answers stay filed
            job_of = {r.custom_id: r.job_id for r in requests}
            await self._on_permanent({job_of[cid] for cid in outcome.refused}, outcome.rejected)

    async def _cut_short(
        self,
        ids: Sequence[str],
        jobs: set[int],
        saved: set[str],
        unsaved: dict[str, RequestResult],
        exc: Exception,
    ) -> None:
        """A call that raised: the answers it got are filed, the rest released to go again; rejected
        credentials fail the jobs."""
        if unsaved:
            self._unfiled.append(_Answers(list(unsaved), list(unsaved.values()), jobs))
            await self.file_pending()
        await self._release([cid for cid in ids if cid not in saved and cid not in unsaved])
        if isinstance(exc, PermanentError):  # bad credentials before any answer
            await self._on_permanent(jobs, exc)
        else:
            log.error("synchronous calls for jobs %s cut short; they go again", sorted(jobs), exc_info=exc)

    def _on_result(
        self, requests: Sequence[PreparedRequest], saved: set[str], unsaved: dict[str, RequestResult]
    ) -> Callable[[RequestResult], None]:
        """Each answer as it arrives: filed at once, then its job's progress written."""
        save, progress = self._saver(saved, unsaved), self._progress_of(requests, unsaved)

        def on_result(result: RequestResult) -> None:
            save(result)
            progress(result)

        return on_result

    def _saver(self, saved: set[str], unsaved: dict[str, RequestResult]) -> Callable[[RequestResult], None]:
        """Files each answer as it arrives (on the call's thread): persisted before the call ends,
        whatever happens to this process or the database after. One that fails is spooled, and
        filed later."""

        def save(result: RequestResult) -> None:
            try:
                self._filer.file(self.tag, [result.custom_id], [result])
            except Exception as exc:  # the database: filed with the call's other answers
                unsaved[result.custom_id] = result
                self._keep(result, exc)
                return
            saved.add(result.custom_id)

        return save

    def _keep(self, result: RequestResult, refused: Exception) -> None:
        """Write an answer the database refused to the spool, where a killed process leaves it."""
        cid = result.custom_id
        if self._spool is None:
            log.warning("answer %s kept in memory to be filed: %s", cid, refused)
            return
        try:
            self._spool.keep(self.tag, result)
        except Exception as exc:  # the store away too: it waits in memory, as a last resort
            log.warning("answer %s kept in memory only (database: %s; spool: %s)", cid, refused, exc)
            return
        self._spooled.add(cid)
        log.warning("answer %s spooled to be filed: %s", cid, refused)

    def _progress_of(
        self, requests: Sequence[PreparedRequest], unsaved: Mapping[str, RequestResult]
    ) -> Callable[[RequestResult], None]:
        """Writes a job's progress as each of its answers comes back (on the call's own thread; a
        failure to write it costs nothing but the progress shown). An answer filed counts as the
        database has it (an unusable one goes again: not done); one whose filing failed (``unsaved``,
        spooled) counts as answered."""
        job_of = {r.custom_id: r.job_id for r in requests}

        def on_result(result: RequestResult) -> None:
            job = job_of.get(result.custom_id)
            if job is None or result.type is not ResultType.SUCCEEDED:
                return
            waiting = sum(
                1
                for cid, one in unsaved.items()
                if job_of.get(cid) == job and one.type is ResultType.SUCCEEDED
            )
            try:
                counts = self._state.chunk_progress([job]).get(job)
                if counts is not None:
                    self._state.set_progress({job: counts.percent({}, waiting)})
            except Exception as exc:
                log.debug("progress of job %d not written: %s", job, exc)

        return on_result

    async def _release(self, custom_ids: Sequence[str]) -> None:
        try:
            await self._io(self._state.release_chunks, self.tag, list(custom_ids))
        finally:  # if the release failed, the sweep releases them: they are no longer live
            self.live.difference_update(custom_ids)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("synchronous call task failed", exc_info=task.exception())
