"""PrepareScheduler without Ray: the cap on tasks in flight, the backlog bound, failures per job."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from clock import FakeClock
from driver_support import pending_job
from ray.exceptions import WorkerCrashedError
from statements import statements

from raybatch.errors import DatabaseUnavailable, InvalidSource
from raybatch.ids import custom_id, sha256_bytes
from raybatch.loops.scheduler import GROUP_SOURCE_BYTES, PrepareScheduler
from raybatch.models import (
    CachedPage,
    ChunkRecord,
    ChunkStatus,
    JobRecord,
    JobStatus,
    PageText,
    Priority,
    ResultType,
    SourceKind,
    Usage,
)
from raybatch.settings import StateSettings
from raybatch.state import SqlStateStore, open_state
from raybatch.steps.chunk import ChunkPlan
from raybatch.work.prepared_chunk import ChunkSummary

REQUEST_BYTES = 1_000_000


class FakeTasks:
    """Records launches; ``finish`` completes them; ``fail`` makes a chunk raise."""

    def __init__(self) -> None:
        self.launched: list[tuple[int, int]] = []
        self.done: set[Any] = set()
        self.failing: dict[tuple[int, int], BaseException] = {}
        self.config = "v1"  # stands for the request configuration: a new value changes every key
        self.groups: list[list[int]] = []  # the jobs of each group task launched
        self.crashed: set[Any] = set()  # group tasks whose worker dies
        self.sources: dict[tuple[int, int], Any] = {}  # what each chunk's task was given to read

    def load(self, job: JobRecord) -> Any:
        return ("source", job.id)

    def stored(self, job: JobRecord, plan: ChunkPlan) -> tuple[Any, Any] | None:
        return None

    def processing_key(self, job: JobRecord, n: int) -> str:
        return f"{job.sha256[:8]}-{n}-{self.config}"

    def prepare(self, job: JobRecord, plan: ChunkPlan, source: Any) -> tuple[Any, Any]:
        self.launched.append((job.id, plan.n))
        self.sources[job.id, plan.n] = source
        key = self.processing_key(job, plan.n)
        return ("summary", job.id, plan.n, plan.first, plan.last, key), ("payload", job.id, plan.n)

    def prepare_group(self, items: Any) -> tuple[Any, list[Any]]:
        """One task for several chunks: its ref names theirs; ``crashed`` makes it die whole."""
        summaries, payloads = zip(*(self.prepare(job, plan, None) for job, plan in items), strict=True)
        self.groups.append([job.id for job, _ in items])
        return ("group", summaries), list(payloads)

    def wait(self, refs: list[Any], num_returns: int, timeout: float) -> tuple[list[Any], list[Any]]:
        return [r for r in refs if r in self.done], [r for r in refs if r not in self.done]

    def get(self, ref: Any) -> Any:
        if ref[0] == "group":
            if ref in self.crashed:
                raise WorkerCrashedError()
            return [self._outcome(summary) for summary in ref[1]]
        return self._summary(ref)

    def _outcome(self, ref: Any) -> Any:
        try:
            return self._summary(ref)
        except Exception as exc:  # a group task sends each chunk's failure back
            return exc

    def _summary(self, ref: Any) -> ChunkSummary:
        _, job_id, n, first, last, key = ref
        if (job_id, n) in self.failing:
            raise self.failing[job_id, n]
        record = ChunkRecord(job_id, n, first, last, custom_id(job_id, n), key, ChunkStatus.PREPARED)
        record = replace(record, request_bytes=REQUEST_BYTES)
        return ChunkSummary(record, 0, 0)

    def finish_all(self, scheduler: PrepareScheduler) -> None:
        self.done |= set(scheduler._in_flight)


def scheduler(
    state: SqlStateStore, tasks: FakeTasks, cap: Any, backlog: int = 10**9, **options: Any
) -> PrepareScheduler:
    return PrepareScheduler(
        state,
        tasks,
        worker_id="t",
        max_in_flight=cap,
        max_backlog_bytes=backlog,
        lease_seconds=60,
        max_attempts=3,
        wait=tasks.wait,
        get=tasks.get,
        **options,
    )


def test_the_cap_bounds_tasks_in_flight_and_may_change(state: SqlStateStore) -> None:
    job = pending_job(state, 1, pages=80)  # 10 chunks
    tasks, cap = FakeTasks(), [3]
    sched = scheduler(state, tasks, lambda: cap[0])
    sched.claim([job])
    sched.tick(0)
    assert len(tasks.launched) == 3
    cap[0] = 6  # the cluster grew
    sched.tick(0)
    assert len(tasks.launched) == 6
    ready = []
    while not sched.idle:
        tasks.finish_all(sched)
        ready += sched.tick(0)
    assert [r.job_id for r in ready] == [job]
    assert sorted(ready[0].payloads) == list(range(10))
    assert state.get_job(job).status is JobStatus.PREPARED
    assert {c.status for c in state.get_chunks(job)} == {ChunkStatus.PREPARED}


def test_only_jobs_with_chunks_saved_ask_the_store_for_what_an_estimate_kept(state: SqlStateStore) -> None:
    fresh, estimated = pending_job(state, 1, pages=8), pending_job(state, 2, pages=8)
    saved = ChunkRecord(estimated, 0, 1, 8, custom_id(estimated, 0), "older", ChunkStatus.PREPARED)
    state.save_chunks(estimated, [saved])  # as an estimate leaves it, before it keeps the request
    tasks, asked = FakeTasks(), []
    tasks.stored = lambda job, plan: asked.append(job.id)  # type: ignore[method-assign]  # kept: none
    sched = scheduler(state, tasks, 8)
    sched.claim([fresh, estimated])
    sched.tick(0)
    assert asked == [estimated]  # a fresh job costs the store nothing
    assert sorted(job_id for job_id, _ in tasks.launched) == [fresh, estimated]


def test_the_coordinators_backlog_holds_new_launches(state: SqlStateStore) -> None:
    job = pending_job(state, 1, pages=80)
    tasks = FakeTasks()
    sched = scheduler(state, tasks, 8, backlog=4 * REQUEST_BYTES)
    sched.claim([job])
    sched.tick(10 * REQUEST_BYTES)  # the coordinator already holds more than the bound
    assert tasks.launched == []
    sched.tick(0)
    assert 1 <= len(tasks.launched) <= 4


def test_a_chunk_that_cannot_be_prepared_fails_its_job_only(state: SqlStateStore) -> None:
    bad, good = pending_job(state, 1, pages=16), pending_job(state, 2, pages=8)
    tasks = FakeTasks()
    from ray.exceptions import RayTaskError

    tasks.failing[bad, 1] = RayTaskError(
        "prepare_chunk", "traceback", InvalidSource("page 9 cannot be rendered")
    )
    sched = scheduler(state, tasks, 8)
    sched.claim([bad, good])
    ready = []
    for _ in range(5):
        sched.tick(0)
        tasks.finish_all(sched)
        ready += sched.tick(0)
    assert [r.job_id for r in ready] == [good]
    failed = state.get_job(bad)
    assert failed.status is JobStatus.FAILED
    assert "page 9 cannot be rendered" in (failed.error_message or "")
    assert failed.error_class == "InvalidSource"


def test_chunks_already_answered_are_not_prepared_again(state: SqlStateStore) -> None:
    job = pending_job(state, 1, pages=16)
    tasks = FakeTasks()
    key = tasks.processing_key(state.get_job(job), 0)  # answered under the key it would get now
    answered = ChunkRecord(job, 0, 1, 8, custom_id(job, 0), key, ChunkStatus.SUCCEEDED, 10, answer="{}")
    state.save_chunks(job, [answered])
    sched = scheduler(state, tasks, 8)
    sched.claim([job])
    sched.tick(0)
    assert tasks.launched == [(job, 1)]


def test_a_job_whose_prepare_keeps_dying_ends_failed_not_in_a_loop(tmp_path: Path) -> None:
    """Each claim counts an attempt in the DB; past PREPARE_MAX_ATTEMPTS the job fails."""
    clock = FakeClock()
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 's.db'}"), now=clock)
    job = pending_job(state, 1, pages=8)
    for attempt in (1, 2, 3):
        sched = scheduler(state, FakeTasks(), 8)  # a fresh driver after the last one died
        assert sched.claim([job]) == 1
        assert state.get_job(job).attempts == attempt
        clock.advance(61)  # the dead driver's lease runs out
    sched = scheduler(state, FakeTasks(), 8)
    sched.claim([job])
    failed = state.get_job(job)
    assert failed.status is JobStatus.FAILED
    assert failed.error_class == "AttemptsExhausted"


def test_a_worker_killed_for_memory_fails_its_job_with_the_reason(state: SqlStateStore) -> None:
    from ray.exceptions import OutOfMemoryError

    job = pending_job(state, 1, pages=8)
    tasks = FakeTasks()
    sched = scheduler(state, tasks, 8)
    sched.claim([job])
    sched.tick(0)
    tasks.failing[job, 0] = OutOfMemoryError("the task used too much memory")
    tasks.finish_all(sched)
    assert sched.tick(0) == []
    failed = state.get_job(job)
    assert failed.status is JobStatus.FAILED
    assert failed.error_class == "OutOfMemoryError"
    assert "memory" in (failed.error_message or "")


def test_ocr_reads_of_tasks_are_cached_by_the_driver_together_before_their_jobs_are_prepared(
    state: SqlStateStore,
) -> None:
    jobs = [pending_job(state, i, pages=16) for i in (1, 2)]  # two chunks each
    sha256 = {job: state.get_job(job).sha256 for job in jobs}

    def reads(job_id: int, n: int) -> tuple[CachedPage, ...]:
        first = n * 8 + 1
        ocr = CachedPage("engine-1", PageText(first, f"Счёт {job_id}", "ocr:engine-1", 0.9, 90))
        return ocr, CachedPage("engine-2", PageText(first + 1, f"Счёт {job_id}", "ocr:engine-2", 0.8))

    class ReadingTasks(FakeTasks):
        def _summary(self, ref: Any) -> ChunkSummary:
            summary = super()._summary(ref)
            return replace(summary, ocr_reads=reads(summary.record.job_id, summary.record.n))

    tasks = ReadingTasks()
    sched = scheduler(state, tasks, 8, save_jobs=2, save_seconds=60)
    sched.claim(jobs)
    sched.tick(0)
    tasks.finish_all(sched)
    with statements(state) as sent:
        assert len(sched.tick(0)) == 2
    touched = [one.split()[0] for one in sent if "page_ocr" in one or "UPDATE jobs" in one]
    assert touched == ["INSERT", "UPDATE"]  # every page of the save at once, then the jobs prepared
    for job in jobs:
        for n in (0, 1):
            for read in reads(job, n):
                assert state.get_page_text(sha256[job], read.text.page, read.engine) == read.text


def test_ocr_reads_the_database_refuses_leave_their_jobs_to_be_prepared_again(
    state: SqlStateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = pending_job(state, 1, pages=8)
    read = CachedPage("engine-1", PageText(1, "Счёт 1", "ocr:engine-1", 0.9))

    class ReadingTasks(FakeTasks):
        def _summary(self, ref: Any) -> ChunkSummary:
            return replace(super()._summary(ref), ocr_reads=(read,))

    def refused(reads: Any) -> None:
        raise DatabaseUnavailable("the database went away")

    monkeypatch.setattr(state, "put_page_texts", refused)
    tasks = ReadingTasks()
    sched = scheduler(state, tasks, 8)
    sched.claim([job])
    sched.tick(0)
    tasks.finish_all(sched)
    assert sched.tick(0) == []  # not prepared without its page's text: its lease runs out, and again
    assert state.get_job(job).status is JobStatus.PREPARING


def _answer_all(state: SqlStateStore, job_id: int) -> None:
    chunks = state.get_chunks(job_id)
    state.mark_chunks_submitted([c.custom_id for c in chunks], "msgbatch_1")
    for c in chunks:
        state.file_result(c.custom_id, "msgbatch_1", ResultType.SUCCEEDED, answer="{}", usage=Usage(100, 10))


def _prepare_all(state: SqlStateStore, tasks: FakeTasks, job_ids: list[int]) -> list[Any]:
    sched = scheduler(state, tasks, 8)
    sched.claim(job_ids)
    ready = sched.tick(0)
    while not sched.idle:
        tasks.finish_all(sched)
        ready += sched.tick(0)
    return ready


def test_a_small_local_file_is_read_by_each_chunk_task_a_larger_or_s3_one_once_by_a_load_task(
    state: SqlStateStore,
) -> None:
    small = pending_job(state, 1, pages=16, size_bytes=GROUP_SOURCE_BYTES)
    large = pending_job(state, 2, pages=16, size_bytes=GROUP_SOURCE_BYTES + 1)
    remote, _ = state.register_job(
        sha256=sha256_bytes(b"job 3"),
        source_uri="s3://bucket/3.pdf",
        source_name="3.pdf",
        kind=SourceKind.PDF,
        size_bytes=1000,
    )
    state.transition(remote.id, [JobStatus.PENDING], JobStatus.PENDING, pages=16)
    tasks = FakeTasks()
    ready = _prepare_all(state, tasks, [small, large, remote.id])
    assert sorted(r.job_id for r in ready) == [small, large, remote.id]
    assert tasks.sources[small, 0] is None and tasks.sources[small, 1] is None, "each task reads it"
    for job in (large, remote.id):
        assert tasks.sources[job, 0] == tasks.sources[job, 1] == ("source", job), "one load, shared"


def test_answers_are_reused_exactly_when_the_key_matches(state: SqlStateStore) -> None:
    first = pending_job(state, 1, pages=16)
    tasks = FakeTasks()
    _prepare_all(state, tasks, [first])
    _answer_all(state, first)
    assert len(tasks.launched) == 2

    # The same file as a new job (``--force``): every chunk takes the answer held, nothing is prepared.
    forced = pending_job(state, 1, pages=16, force=True)
    ready = _prepare_all(state, tasks, [forced])
    assert len(tasks.launched) == 2 and [r.job_id for r in ready] == [forced]
    copies = state.get_chunks(forced)
    assert [c.reused_from for c in copies] == [f"job_{first}_batch_0", f"job_{first}_batch_1"]
    assert {c.status for c in copies} == {ChunkStatus.SUCCEEDED} and all(c.answer == "{}" for c in copies)
    assert state.request_totals().reused == 2
    assert state.request_totals([forced]).usage_by_mode["batch"].input_tokens == 0  # nothing paid

    # Another configuration (model, modality, ...) changes every key: every chunk is prepared again.
    tasks.config = "v2"
    state.transition(first, [JobStatus.PREPARED, JobStatus.ANSWERED], JobStatus.PENDING)
    _prepare_all(state, tasks, [first])
    assert tasks.launched[2:] == [(first, 0), (first, 1)]
    assert {c.status for c in state.get_chunks(first)} == {ChunkStatus.PREPARED}


def test_a_prepare_task_past_its_time_limit_is_canceled_and_retried_then_fails(state: SqlStateStore) -> None:
    """A task that never ends (a hung render) is canceled at PREPARE_TIMEOUT; the job is prepared
    again within its attempts, and fails ``TimeLimitExceeded`` naming the limit on its last one."""
    job = pending_job(state, 1, pages=16, size_bytes=GROUP_SOURCE_BYTES + 1)  # read by a load task
    other = pending_job(state, 2, pages=8)
    tasks, clock, canceled = FakeTasks(), FakeClock(), []
    sched = PrepareScheduler(
        state,
        tasks,
        worker_id="t",
        max_in_flight=8,
        max_backlog_bytes=10**9,
        lease_seconds=60,
        max_attempts=2,
        wait=tasks.wait,
        get=tasks.get,
        timeout=30.0,
        cancel=canceled.append,
        monotonic=clock.monotonic,
    )
    sched.claim([job, other])
    sched.tick(0)
    tasks.done |= {ref for ref in sched._in_flight if ref[1] == other}  # the other job's task ends
    assert [r.job_id for r in sched.tick(0)] == [other]
    clock.advance(29.0)
    sched.tick(0)
    assert canceled == [] and sched.holds(job), "within its limit a task runs on"
    clock.advance(2.0)  # 31 s
    sched.tick(0)
    assert len([r for r in canceled if r[0] == "summary"]) == 2, "both of the job's tasks are canceled"
    assert ("source", job) in canceled, "and its source load"
    assert not sched.holds(job)
    assert state.get_job(job).status is JobStatus.PENDING, "soft limit: it goes again"
    assert state.get_job(other).status is JobStatus.PREPARED, "the other job is not touched"
    assert sched.claim([job]) == 1  # the next try (the driver claims it again)
    sched.tick(0)
    clock.advance(31.0)  # 62 s
    sched.tick(0)
    failed = state.get_job(job)
    assert failed.status is JobStatus.FAILED, "hard limit: the last try fails the job"
    assert failed.error_class == "TimeLimitExceeded"
    assert "PREPARE_TIMEOUT (30 s)" in (failed.error_message or "")


def test_prepared_jobs_are_saved_together_when_enough_are_complete_or_the_oldest_waited(
    state: SqlStateStore,
) -> None:
    """A run saves prepared chunks in one transaction for several jobs (``save_jobs``), or once the
    oldest waited ``save_seconds``, or when nothing else is in flight; urgent jobs at once."""
    jobs = [pending_job(state, n) for n in range(6)]
    tasks, clock, saves = FakeTasks(), FakeClock(), []
    record = state.record_prepared

    def counted(chunks: Any, leases: Any) -> Any:
        saves.append(sorted(lease.job_id for lease in leases))
        return record(chunks, leases)

    state.record_prepared = counted  # type: ignore[method-assign]
    sched = scheduler(state, tasks, 8, monotonic=clock.monotonic, save_jobs=3, save_seconds=0.1)

    def finish(*job_ids: int) -> list[int]:
        tasks.done |= {ref for ref in sched._in_flight if ref[1] in job_ids}
        return [r.job_id for r in sched.tick(0)]

    sched.claim(jobs)
    sched.tick(0)
    assert finish(jobs[0]) == [] and saves == [], "one complete job waits for others"
    assert sched.wake_in(0.5) == 0.1 and not sched.idle
    assert finish(jobs[1]) == []
    assert finish(jobs[2]) == jobs[:3] and saves == [jobs[:3]], "three: saved in one transaction"
    assert state.get_job(jobs[0]).status is JobStatus.PREPARED
    assert finish(jobs[3]) == []
    clock.advance(0.1)
    assert sched.wake_in(0.5) == 0.0
    assert finish() == [jobs[3]], "the oldest waited long enough"
    assert finish(jobs[4]) == []
    assert finish(jobs[5]) == jobs[4:], "nothing else in flight: saved at once"
    assert saves == [jobs[:3], [jobs[3]], jobs[4:]] and sched.idle


def test_an_urgent_prepared_job_is_saved_at_once(state: SqlStateStore) -> None:
    urgent, other = pending_job(state, 1), pending_job(state, 2)
    state.set_priority([urgent], Priority.URGENT)
    tasks = FakeTasks()
    sched = scheduler(state, tasks, 8, save_jobs=8, save_seconds=60.0)
    sched.claim([urgent, other])
    sched.tick(0)
    tasks.done |= {ref for ref in sched._in_flight if ref[1] == urgent}
    assert [r.job_id for r in sched.tick(0)] == [urgent]


def test_small_jobs_are_prepared_in_groups_and_a_broken_file_fails_alone(state: SqlStateStore) -> None:
    jobs = [pending_job(state, n) for n in range(1, 8)]  # one-chunk jobs of small local files
    tasks = FakeTasks()
    tasks.failing[jobs[2], 0] = InvalidSource("not a PDF after all")
    sched = scheduler(state, tasks, 8, group_chunks=4)
    sched.claim(jobs)
    sched.tick(0)
    assert tasks.groups == [jobs[:4], jobs[4:]]
    saved = spy_on_saves(state)
    tasks.finish_all(sched)
    ready = sched.tick(0)
    assert sorted(r.job_id for r in ready) == sorted(set(jobs) - {jobs[2]})
    assert len(saved) == 1  # what the tasks prepared, recorded in one statement
    failed = state.get_job(jobs[2])
    assert failed.status is JobStatus.FAILED and failed.error_class == "InvalidSource"


def test_the_cap_counts_a_group_task_as_one_task_and_the_backlog_every_chunk_of_it(
    state: SqlStateStore,
) -> None:
    jobs = [pending_job(state, n) for n in range(1, 10)]
    tasks = FakeTasks()
    sched = scheduler(state, tasks, 2, group_chunks=4)  # two tasks in flight, of up to 4 jobs each
    sched.claim(jobs)
    sched.tick(0)
    assert tasks.groups == [jobs[:4], jobs[4:8]], "two full groups: one CPU each"
    assert sched._chunks_in_flight == 8
    tasks.finish_all(sched)
    sched.tick(0)
    assert tasks.groups[2:] == [], "the last job alone is not a group"
    assert len(sched.refs) == 1


def test_a_group_task_that_dies_leaves_its_jobs_to_be_prepared_alone(state: SqlStateStore) -> None:
    jobs = [pending_job(state, n) for n in range(1, 5)]
    tasks = FakeTasks()
    sched = scheduler(state, tasks, 8, group_chunks=4)
    sched.claim(jobs)
    sched.tick(0)
    (group,) = sched.refs
    tasks.crashed.add(group)  # its worker is killed midway: nothing of it comes back
    saved = spy_on_saves(state)
    tasks.finish_all(sched)
    assert sched.tick(0) == []
    assert len(sched.refs) == 4 and group not in sched.refs  # one task each now, none grouped again
    ready = []
    while not sched.idle:
        tasks.finish_all(sched)
        ready += sched.tick(0)
    assert sorted(r.job_id for r in ready) == jobs
    assert sorted(c for call in saved for c in call) == [(job, 0) for job in jobs]  # each recorded once


def spy_on_saves(state: SqlStateStore) -> list[list[tuple[int, int]]]:
    """From now on, the (job, chunk) of the chunks each ``record_prepared`` saves."""
    saved: list[list[tuple[int, int]]] = []
    record = state.record_prepared

    def spy(chunks: Any, finished: Any) -> Any:
        saved.append([(c.job_id, c.n) for c in chunks])
        return record(chunks, finished)

    state.record_prepared = spy  # type: ignore[method-assign]
    return saved


def test_prepared_chunks_wait_for_more_while_tasks_run_and_are_saved_once_none_does(
    state: SqlStateStore,
) -> None:
    jobs = [pending_job(state, n) for n in range(1, 7)]
    tasks = FakeTasks()
    sched = scheduler(state, tasks, 2, save_jobs=32, save_seconds=60.0)
    sched.claim(jobs)
    sched.tick(0)
    saved = spy_on_saves(state)
    tasks.finish_all(sched)  # the two in flight end together, and more are queued
    assert sched.tick(0) == [] and saved == []  # held: the next tasks were launched in this tick
    ready = []
    while not sched.idle:
        tasks.finish_all(sched)
        ready += sched.tick(0)
    assert sorted(r.job_id for r in ready) == jobs
    assert len(saved) == 1 and len(saved[0]) == len(jobs)  # once no task was left: all in one
