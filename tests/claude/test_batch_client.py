"""AnthropicBatchClient through the real SDK against the emulator: normalising, reconciling, streaming."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest
from anthropic.types.messages import MessageBatch
from clock import FakeClock
from emulator_support import API_KEY, requests, running, settings_for

from raybatch.claude.batch_client import AnthropicBatchClient, make_sdk_client, to_batch_state
from raybatch.claude.emulator import EmulatorServer, Faults, ManualClock
from raybatch.errors import (
    AuthenticationFailed,
    ConfigError,
    InvalidRequest,
    OutagePastBudget,
    Overloaded,
    ResourceNotFound,
    SpendLimitReached,
    TransientError,
    UpstreamUnavailable,
)
from raybatch.models import BatchStatus, ResultType
from raybatch.retry import Backoff
from raybatch.settings import ClaudeSettings

NO_JITTER = Backoff(initial=2.0, factor=2.0, cap=60.0)


@contextmanager
def batch_client(**config) -> Iterator[tuple[AnthropicBatchClient, EmulatorServer, ManualClock]]:
    with running(**config) as (server, clock):
        client = AnthropicBatchClient(settings_for(server), max_retries=0)
        with client:
            yield client, server, clock


def _since() -> datetime:
    return datetime.now(UTC) - timedelta(seconds=1)


def test_create_retrieve_list_cancel_normalise_into_batch_state():
    with batch_client(processing_seconds=10) as (client, _, clock):
        created = client.create(requests(4))
        clock.advance(5)
        retrieved = client.retrieve(created.id)
        listed = list(client.list())
        canceled = client.cancel(created.id)
    assert created.status is BatchStatus.IN_PROGRESS and created.total == 4
    assert created.created_at is not None and created.created_at.tzinfo is not None
    assert retrieved.counts["processing"] == 2 and retrieved.done_fraction == 0.5
    assert retrieved.raw["id"] == created.id and retrieved.raw["type"] == "message_batch"
    assert [s.id for s in listed] == [created.id]
    assert canceled.status is BatchStatus.CANCELING


def test_unknown_processing_status_is_tolerated_and_raw_kept():
    payload = {
        "id": "msgbatch_01x", "type": "message_batch", "processing_status": "archiving",
        "request_counts": {"processing": 0, "succeeded": 1, "errored": 0, "canceled": 0, "expired": 0},
        "created_at": "2026-11-30T00:00:00Z", "expires_at": "2026-12-01T00:00:00Z", "new_field": 1,
    }  # fmt: skip
    state = to_batch_state(MessageBatch.construct(**payload))  # how the SDK builds an unvalidated response
    assert state.status is BatchStatus.UNKNOWN
    assert state.raw["processing_status"] == "archiving" and state.raw["new_field"] == 1
    assert state.counts["succeeded"] == 1


def test_results_normalise_every_result_type_with_usage():
    faults = Faults(
        errored_ids=frozenset({"job_1_batch_1"}),
        expired_ids=frozenset({"job_1_batch_2"}),
        canceled_ids=frozenset({"job_1_batch_3"}),
    )
    with batch_client(processing_seconds=0, faults=faults) as (client, _, _):
        batch = client.create(requests(4))
        with client.results(batch.id) as stream:
            results = {r.custom_id: r for r in stream}
        assert stream.closed
    assert results["job_1_batch_1"].type is ResultType.ERRORED
    assert results["job_1_batch_1"].error_type == "api_error" and results["job_1_batch_1"].error_message
    assert results["job_1_batch_2"].type is ResultType.EXPIRED
    assert results["job_1_batch_3"].type is ResultType.CANCELED
    ok = results["job_1_batch_4"]
    assert ok.type is ResultType.SUCCEEDED and json.loads(ok.text or "") == {"pages": [7, 8]}
    assert ok.usage is not None and ok.usage.input_tokens > 0 and ok.usage.output_tokens > 0


def test_results_before_the_end_are_refused_and_the_stream_closes_on_early_exit():
    with batch_client(processing_seconds=10) as (client, _, clock):
        batch = client.create(requests(3))
        with pytest.raises(InvalidRequest), client.results(batch.id):
            pass
        clock.advance(10)
        with client.results(batch.id) as stream:
            first = next(stream)
        assert stream.closed and first.type is ResultType.SUCCEEDED


def test_cut_results_stream_raises_transient_and_rereading_gives_every_result_once():
    faults = Faults(cut_results_after=3, cut_results_times=1)
    with batch_client(processing_seconds=0, faults=faults) as (client, _, _):
        batch = client.create(requests(8))
        seen = []
        with pytest.raises(UpstreamUnavailable), client.results(batch.id) as stream:
            seen.extend(stream)
        assert stream.closed
        with client.results(batch.id) as again:
            reread = list(again)
    # The SDK reads in 64-byte chunks: the tail of the last line before the cut may stay unread.
    assert 1 <= len(seen) <= 3 and all(r.type is ResultType.SUCCEEDED and r.text for r in seen)
    assert sorted(r.custom_id for r in reread) == sorted(r.custom_id for r in requests(8))
    by_id = {r.custom_id: r for r in reread}
    assert by_id | {r.custom_id: r for r in seen} == by_id, "what was seen before the cut stays valid"


def test_duplicated_result_lines_arrive_twice_and_are_identifiable():
    with batch_client(processing_seconds=0, faults=Faults(duplicate_fraction=1.0)) as (client, _, _):
        batch = client.create(requests(3))
        with client.results(batch.id) as stream:
            results = list(stream)
    assert len(results) == 6
    assert {r.custom_id: r for r in results} == {r.custom_id: r for r in results[::-1]}, "copies are equal"
    assert len({r.custom_id for r in results}) == 3


def test_dropped_create_response_is_reconciled_into_exactly_one_batch():
    with batch_client(faults=Faults(drop_create_responses=1)) as (client, server, _):
        sleeps: list[float] = []
        state = client.create_reconciled(
            requests(3), created_after=_since(), known_ids=set(), backoff=NO_JITTER, sleep=sleeps.append
        )
        batches = list(client.list())
    assert [b.id for b in batches] == [state.id] and state.total == 3
    assert server.app.calls["create"] == 1, "adopted, not created again"
    assert sleeps == [2.0]


def test_reconciling_skips_known_batches_with_the_same_request_count():
    with batch_client() as (client, server, _):
        since = _since()
        older = client.create(requests(3, job_id=9))
        server.faults.drop_create_responses = 1
        state = client.create_reconciled(
            requests(3), created_after=since, known_ids={older.id}, backoff=NO_JITTER, sleep=lambda _: None
        )
        ids = [b.id for b in client.list()]
    assert state.id != older.id and sorted(ids) == sorted([older.id, state.id])


def test_rate_limited_create_honours_retry_after_without_reconciling():
    with batch_client(faults=Faults(rate_limit_times=2, retry_after=30)) as (client, server, _):
        sleeps: list[float] = []
        state = client.create_reconciled(
            requests(2), created_after=_since(), known_ids=set(), backoff=NO_JITTER, sleep=sleeps.append
        )
        assert [b.id for b in client.list()] == [state.id]
    assert sleeps == [30.0, 30.0], "retry-after (30 s) wins over the backoff (2 s, 4 s)"
    assert server.app.calls["create"] == 3 and server.app.calls["list"] == 1  # only the final check above


def test_server_error_on_create_reconciles_then_creates_once():
    with batch_client(faults=Faults(server_error_times=1)) as (client, server, _):
        state = client.create_reconciled(
            requests(2), created_after=_since(), known_ids=set(), backoff=NO_JITTER, sleep=lambda _: None
        )
        assert [b.id for b in client.list()] == [state.id]
    assert server.app.calls["create"] == 2


def test_create_waits_out_its_budget_then_gives_up_transiently_with_nothing_created():
    faults = Faults(overloaded_fraction=1.0, endpoints=frozenset({"create"}))
    clock = FakeClock()
    with batch_client(faults=faults) as (client, server, _):
        with pytest.raises(OutagePastBudget) as info:
            client.create_reconciled(
                requests(2),
                created_after=_since(),
                known_ids=set(),
                budget=30.0,
                backoff=NO_JITTER,
                sleep=clock.sleep,
                monotonic=clock.monotonic,
            )
        assert list(client.list()) == []
    assert isinstance(info.value, TransientError), "an outage parks work; it never fails it"
    assert isinstance(info.value.__cause__, Overloaded)
    assert not info.value.maybe_created
    waited = clock.monotonic()
    assert waited <= 30.0 and server.app.calls["create"] == 5  # waits of 2, 4, 8, 16 s fill the 30 s


def test_spend_limit_on_create_is_not_retried():
    faults = Faults(spend_limit=True)
    with batch_client(faults=faults) as (client, server, _), pytest.raises(SpendLimitReached):
        client.create_reconciled(requests(2), created_after=_since(), known_ids=set(), sleep=lambda _: None)
    assert server.app.calls["create"] == 1


def test_transient_404_after_create_is_resource_not_found():
    with batch_client(faults=Faults(not_found_after_create=1)) as (client, _, _):
        batch = client.create(requests(1))
        with pytest.raises(ResourceNotFound):
            client.retrieve(batch.id)
        assert client.retrieve(batch.id).id == batch.id


def test_sdk_retries_rate_limits_and_overloads_on_reads():
    # The SDK sleeps for real: 1 ms as the 429's retry-after-ms says, about 0.5 s after the 529.
    faults = Faults(rate_limit_times=1, overloaded_times=1, retry_after=0.001)
    with running(faults=faults) as (server, _):
        with AnthropicBatchClient(settings_for(server), max_retries=2) as client:
            assert list(client.list()) == []
        assert server.app.calls["list"] == 3


def test_wrong_key_is_authentication_failed_and_missing_settings_are_config_errors():
    with running() as (server, _):
        settings = settings_for(server, anthropic_api_key="nope")
        client = AnthropicBatchClient(settings, max_retries=0)
        with client, pytest.raises(AuthenticationFailed) as info:
            client.retrieve("msgbatch_01x")
    assert API_KEY not in str(info.value) and "nope" not in str(info.value)
    with pytest.raises(ConfigError):
        make_sdk_client(ClaudeSettings())


def test_list_stops_at_batches_created_before_the_cut_off():
    with batch_client() as (client, _, _):
        old = client.create(requests(1))
        assert [b.id for b in client.list(created_after=datetime.now(UTC) + timedelta(hours=1))] == []
        assert [b.id for b in client.list(created_after=datetime(2000, 1, 1))] == [old.id]  # naive = UTC
