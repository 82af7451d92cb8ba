"""The fault suite's tools: a state store that fails on cue, a stepped coordinator, the ledger check."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from builders import PreparedJob, offer
from clock import FakeClock
from pipeline_support import chunk_answers

from raybatch.claude.emulator import EmulatorServer
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.errors import DatabaseUnavailable
from raybatch.models import ChunkStatus, JobStatus
from raybatch.settings import ClaudeSettings
from raybatch.state import SqlStateStore

SETTLED = (JobStatus.ANSWERED, JobStatus.FAILED)


class FlakyState:
    """A state store whose named methods raise DatabaseUnavailable on cue, at the port boundary.

    ``fail["attach_batch"] = 1`` fails the next call; ``when`` narrows which calls count.
    """

    def __init__(self, inner: SqlStateStore) -> None:
        self._inner = inner
        self.fail: dict[str, int] = {}
        self.when: dict[str, Callable[..., bool]] = {}
        self.failed: list[str] = []

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            chosen = self.when.get(name, lambda *a, **k: True)(*args, **kwargs)
            if self.fail.get(name, 0) > 0 and chosen:
                self.fail[name] -= 1
                self.failed.append(name)
                raise DatabaseUnavailable(f"{name}: the database went away (injected)")
            return target(*args, **kwargs)

        return call


def claude(emulator: EmulatorServer | str, **overrides: object) -> ClaudeSettings:
    url = emulator if isinstance(emulator, str) else emulator.base_url
    values = {
        "anthropic_base_url": url,
        "anthropic_api_key": "test-key",
        "poll_interval": 0.05,
        "sweep_interval": 0.05,
        "outage_budget": 0.5,
    }
    return ClaudeSettings.model_validate({**values, **overrides})


def coordinator(
    emulator: EmulatorServer | str, state: Any, *, clock: FakeClock | None = None, **overrides: object
) -> BatchCoordinator:
    """A coordinator driven by ``step`` (no loop of its own); ``clock`` is its monotonic time."""
    extra: dict[str, Any] = {"sleep": lambda _: None}  # a cut result stream is read again at once
    if clock is not None:
        extra["monotonic"] = clock.monotonic
    return BatchCoordinator(claude(emulator, **overrides), state, autostart=False, **extra)


async def run_until(
    coord: BatchCoordinator,
    state: Any,
    job_ids: Sequence[int],
    *,
    passes: int = 200,
    tick: Callable[[], None] | None = None,
) -> None:
    """Step until every job is answered or failed; ``tick`` runs between passes (e.g. a clock)."""
    for _ in range(passes):
        with contextlib.suppress(DatabaseUnavailable):  # the coordinator's own loop logs it and goes on
            await coord.step()
        if all(state.get_job(j).status in SETTLED for j in job_ids):
            await asyncio.gather(*coord._sync.tasks)
            return
        if tick is not None:
            tick()
        await asyncio.sleep(0.02)
    raise AssertionError(f"jobs not settled: {[(j, state.get_job(j).status.value) for j in job_ids]}")


async def settle(coord: BatchCoordinator, state: Any, job: PreparedJob, mode: str = "batch") -> None:
    """Offer ``job`` to ``coord``, step it until the job is answered or failed, and stop it."""
    await offer(coord, job, mode)
    await coord.flush()
    await run_until(coord, state, [job.job_id])
    await coord.stop()


def assert_ledger(
    state: SqlStateStore,
    answers: Mapping[str, int],
    *,
    answered: Sequence[int] = (),
    failed: Mapping[int, str] | None = None,
    unusable: frozenset[str] = frozenset(),
) -> None:
    """Every job ended as expected, and no chunk was paid for twice unless its first answer was unusable."""
    for job_id in answered:
        assert state.get_job(job_id).status is JobStatus.ANSWERED, state.get_job(job_id)
        chunks = state.get_chunks(job_id)
        assert {c.status for c in chunks} == {ChunkStatus.SUCCEEDED}
    for job_id, error_class in (failed or {}).items():
        job = state.get_job(job_id)
        assert (job.status, job.error_class) == (JobStatus.FAILED, error_class), job
    paid_twice = {cid: n for cid, n in chunk_answers(answers).items() if n > 1 and cid not in unusable}
    assert not paid_twice, f"answers paid for more than once: {paid_twice}"
