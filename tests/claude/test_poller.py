"""The poller against the emulator on one manual clock: the poller's sleeps move the batches' time."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from emulator_support import requests, running, settings_for

from raybatch.claude.batch_client import AnthropicBatchClient
from raybatch.claude.emulator import Faults, ManualClock
from raybatch.claude.poller import ended_without_success, poll_backoff, poll_once, wait_for_batch
from raybatch.claude.records import BatchState
from raybatch.errors import BatchFailed, WaitTimedOut
from raybatch.models import BatchStatus


@contextmanager
def polling(**config) -> Iterator[tuple[AnthropicBatchClient, ManualClock, object]]:
    with running(**config) as (server, clock):
        client = AnthropicBatchClient(settings_for(server), max_retries=0)
        with client:
            yield client, clock, server


def _wait(client: AnthropicBatchClient, clock: ManualClock, batch_id: str, **options) -> BatchState:
    values = {"poll_interval": 10.0, "deadline": 3600.0, "sleep": clock.sleep, "monotonic": clock, **options}
    return wait_for_batch(client, batch_id, **values)


def test_backoff_starts_at_one_second_and_grows_by_half_up_to_the_interval():
    delays = poll_backoff(10.0).delays()
    assert [round(next(delays), 4) for _ in range(8)] == [1.0, 1.5, 2.25, 3.375, 5.0625, 7.5938, 10.0, 10.0]


def test_wait_polls_with_backoff_until_the_batch_ends():
    with polling(processing_seconds=40) as (client, clock, _):
        batch = client.create(requests(4))
        progress: list[float] = []
        state = _wait(client, clock, batch.id, on_poll=lambda s: progress.append(s.done_fraction))
    assert state.status is BatchStatus.ENDED and state.counts["succeeded"] == 4
    assert [round(s, 4) for s in clock.sleeps] == [1.0, 1.5, 2.25, 3.375, 5.0625, 7.5938, 10.0, 10.0]
    assert progress == sorted(progress) and progress[-1] == 1.0 and progress[0] == 0.0


def test_deadline_raises_wait_timed_out_after_sleeping_no_further_than_it():
    with polling(processing_seconds=1000) as (client, clock, _):
        batch = client.create(requests(2))
        with pytest.raises(WaitTimedOut):
            _wait(client, clock, batch.id, deadline=30.0)
    assert sum(clock.sleeps) == pytest.approx(30.0)


def test_a_404_just_after_create_is_polled_through():
    with polling(processing_seconds=5, faults=Faults(not_found_after_create=3)) as (client, clock, _):
        batch = client.create(requests(2))
        state = _wait(client, clock, batch.id, not_found_grace=60.0)
    assert state.status is BatchStatus.ENDED and state.id == batch.id


def test_a_batch_still_unknown_after_the_grace_period_is_lost():
    with polling(processing_seconds=5, faults=Faults(not_found_after_create=1000)) as (client, clock, _):
        batch = client.create(requests(2))
        with pytest.raises(BatchFailed):
            _wait(client, clock, batch.id, not_found_grace=5.0)
    assert 5.0 <= sum(clock.sleeps) < 10.0


def test_a_reattached_batch_unknown_to_the_api_fails_at_once():
    with polling() as (client, clock, _):
        with pytest.raises(BatchFailed):
            _wait(client, clock, "msgbatch_01gone", age_at_start=3600.0)
        assert poll_once(client, "msgbatch_01gone", age=1.0) is None
    assert clock.sleeps == []


def test_transient_errors_are_polled_through_honouring_retry_after():
    faults = Faults(overloaded_times=1, rate_limit_times=1, retry_after=20, endpoints=frozenset({"retrieve"}))
    with polling(processing_seconds=2, faults=faults) as (client, clock, _):
        batch = client.create(requests(1))
        state = _wait(client, clock, batch.id)
    assert state.status is BatchStatus.ENDED
    assert clock.sleeps[:2] == [20.0, 1.5], "a 429 waits its retry-after, then a 529 the backoff"


def test_a_batch_ended_with_nothing_succeeded_is_returned_for_filing():
    with polling(processing_seconds=0, faults=Faults(expired_fraction=1.0)) as (client, clock, _):
        batch = client.create(requests(3))
        state = _wait(client, clock, batch.id)
    assert state.status is BatchStatus.ENDED and state.counts["expired"] == 3
    assert ended_without_success(state)


def test_a_canceled_batch_ends_and_is_returned():
    with polling(processing_seconds=100, cancel_seconds=3) as (client, clock, _):
        batch = client.create(requests(3))
        client.cancel(batch.id)
        state = _wait(client, clock, batch.id)
    assert state.counts["canceled"] == 3 and ended_without_success(state)
