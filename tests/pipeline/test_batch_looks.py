"""How often a batch in flight is looked at: every pass while it is young, then once a POLL_INTERVAL
at most however often passes come (each look is a call to the API; a backlog's batches run for
minutes or hours, many at once)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from builders import bundle_texts, prepared_job

from raybatch.claude.records import BatchState
from raybatch.coordinator.batch_poll import BatchPolls
from raybatch.metrics import Metrics
from raybatch.models import BatchStatus
from raybatch.state import SqlStateStore
from raybatch.state.schema import batches


class Running:
    """The API, with every batch in progress; the looks at each counted."""

    def __init__(self) -> None:
        self.looks: Counter[str] = Counter()

    def retrieve(self, batch_id: str) -> BatchState:
        self.looks[batch_id] += 1
        return BatchState(batch_id, BatchStatus.IN_PROGRESS, {"processing": 1}, datetime.now(UTC), None, None)


async def _io(fn: Callable[..., object], *args: object, **kwargs: object) -> object:
    return fn(*args, **kwargs)


async def _settle(jobs: set[int]) -> None:
    return None


@pytest.mark.anyio
async def test_an_old_batch_is_looked_at_once_a_poll_interval_and_a_young_one_every_pass(
    state: SqlStateStore,
) -> None:
    job = prepared_job(state, bundle_texts(0)[:16], name="two", mode="batch")  # two chunks
    for n, batch in ((0, "msgbatch_old"), (1, "msgbatch_young")):
        intent = state.record_batch_intent([job.chunks[n].request.custom_id], 1000)
        state.attach_batch(intent, batch, BatchStatus.IN_PROGRESS, "{}")
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
    with state._engine.begin() as db:  # created an hour ago: past its first POLL_INTERVAL
        old = batches.c.anthropic_id == "msgbatch_old"
        db.execute(sa.update(batches).where(old).values(created_at=an_hour_ago))
    api = Running()
    polls = BatchPolls(state, api, None, io=_io, settle=_settle, metrics=Metrics(), look_every=60.0)  # type: ignore[arg-type]
    for _ in range(5):  # five passes in well under POLL_INTERVAL
        await polls.poll()
    assert api.looks == {"msgbatch_old": 1, "msgbatch_young": 5}
