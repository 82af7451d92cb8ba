"""The fault suite's tools: a state store that fails on cue, a stepped coordinator, the ledger check."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from builders import claude_settings
from clock import FakeClock
from pipeline_support import chunk_answers

from raybatch.claude.emulator import EmulatorServer
from raybatch.coordinator.coordinator import BatchCoordinator
from raybatch.errors import DatabaseUnavailable
from raybatch.models import ChunkStatus, JobStatus
from raybatch.settings import ClaudeSettings
from raybatch.state import SqlStateStore


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
    """``claude_settings`` that also sweeps quickly and gives up on an outage after half a second."""
    return claude_settings(emulator, **{"sweep_interval": 0.05, "outage_budget": 0.5, **overrides})


def coordinator(
    emulator: EmulatorServer | str, state: Any, *, clock: FakeClock | None = None, **overrides: object
) -> BatchCoordinator:
    """A coordinator driven by ``step`` (no loop of its own); ``clock`` is its monotonic time."""
    extra: dict[str, Any] = {"sleep": lambda _: None}  # a cut result stream is read again at once
    if clock is not None:
        extra["monotonic"] = clock.monotonic
    return BatchCoordinator(claude(emulator, **overrides), state, autostart=False, **extra)


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
