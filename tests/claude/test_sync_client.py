"""AnthropicMessageClient through the real SDK against the emulator: bounded, retried, parked."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from emulator_support import echo_responder, requests, running, settings_for

from raybatch.claude.emulator import EmulatorServer, Faults, MalformedKind, SpendLimitKind
from raybatch.claude.sync_client import AnthropicMessageClient
from raybatch.errors import AuthenticationFailed
from raybatch.models import ResultType
from raybatch.retry import Backoff
from raybatch.steps.build_requests import with_params

BACKOFF = Backoff(initial=1.0, factor=2.0, cap=60.0)


@contextmanager
def sync_client(
    concurrency: int = 2, attempts: int = 4, **config
) -> Iterator[tuple[AnthropicMessageClient, EmulatorServer, list[float]]]:
    sleeps: list[float] = []
    with running(**config) as (server, _):
        settings = settings_for(server, sync_concurrency=concurrency)
        client = AnthropicMessageClient(settings, attempts=attempts, backoff=BACKOFF, sleep=sleeps.append)
        with client:
            yield client, server, sleeps


def test_every_request_comes_back_as_a_result_shaped_like_a_batch_result():
    seen: list[str] = []
    with sync_client() as (client, _, _):
        outcome = client.send(requests(5), on_result=lambda r: seen.append(r.custom_id))
    assert not outcome.parked and sorted(seen) == sorted(r.custom_id for r in requests(5))
    by_id = {r.custom_id: r for r in outcome.results}
    for request in requests(5):
        result = by_id[request.custom_id]
        assert result.type is ResultType.SUCCEEDED and result.usage and result.usage.input_tokens > 0
        assert json.loads(result.text or "") == {"pages": [request.first_page, request.last_page]}


def test_concurrency_is_bounded_by_the_settings():
    active, peak, lock = 0, 0, threading.Lock()

    def slow_responder(params):
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.05)
        with lock:
            active -= 1
        return echo_responder(params)

    with sync_client(concurrency=2, responder=slow_responder) as (client, _, _):
        outcome = client.send(requests(8))
    assert len(outcome.results) == 8 and peak == 2


def test_rate_limit_waits_the_retry_after_then_succeeds():
    with sync_client(faults=Faults(rate_limit_times=1, retry_after=7)) as (client, server, sleeps):
        result = client.send_one(requests(1)[0])
    assert result.type is ResultType.SUCCEEDED
    assert sleeps == [7.0] and server.app.calls["messages"] == 2


def test_overloaded_and_server_errors_back_off_and_retry():
    with sync_client(faults=Faults(overloaded_times=1, server_error_times=1)) as (client, server, sleeps):
        result = client.send_one(requests(1)[0])
    assert result.type is ResultType.SUCCEEDED
    assert sleeps == [1.0, 2.0] and server.app.calls["messages"] == 3


@pytest.mark.parametrize(
    ("faults", "error_type"),
    [
        (Faults(overloaded_fraction=1.0), "overloaded_error"),
        (Faults(rate_limit_fraction=1.0, retry_after=1), "rate_limit_error"),
        (Faults(server_error_fraction=1.0), "api_error"),
    ],
)
def test_exhausted_retries_come_back_errored_with_their_type(faults, error_type):
    with sync_client(attempts=3, faults=faults) as (client, server, sleeps):
        result = client.send_one(requests(1)[0])
    assert result.type is ResultType.ERRORED and result.error_type == error_type
    assert server.app.calls["messages"] == 3 and len(sleeps) == 2


def test_an_invalid_request_comes_back_errored_without_retries():
    bad = with_params(requests(1)[0], {**requests(1)[0].params, "messages": []})
    with sync_client() as (client, server, sleeps):
        result = client.send_one(bad)
    assert result.type is ResultType.ERRORED and result.error_type == "invalid_request_error"
    assert server.app.calls["messages"] == 1 and sleeps == []


def test_malformed_answers_are_delivered_as_such():
    faults = Faults(malformed_fraction=1.0, malformed_kind=MalformedKind.PROSE)
    with sync_client(faults=faults) as (client, _, _):
        result = client.send_one(requests(1)[0])
    assert result.type is ResultType.SUCCEEDED and result.text is not None
    assert result.text.startswith("Here is the JSON") and '{"pages": [1, 2]}' in result.text


@pytest.mark.parametrize("kind", list(SpendLimitKind))
def test_spend_limit_parks_the_work_and_stops_sending(kind):
    faults = Faults(spend_limit=True, spend_limit_kind=kind)
    with sync_client(concurrency=2, faults=faults) as (client, server, sleeps):
        outcome = client.send(requests(6))
    assert outcome.spend_limited and outcome.results == []
    assert sorted(outcome.parked) == sorted(r.custom_id for r in requests(6))
    assert server.app.calls["messages"] <= 2 and sleeps == [], "no retries, no new sends"


def test_spend_limit_mid_run_keeps_finished_results_and_parks_the_rest():
    limits: list[Faults] = []

    def answer_then_reach_the_limit(params):
        limits[0].spend_limit = True  # this answer is delivered; the next call meets the limit
        return echo_responder(params)

    with sync_client(concurrency=1, responder=answer_then_reach_the_limit) as (client, server, _):
        limits.append(server.faults)
        outcome = client.send(requests(5))
    assert len(outcome.results) == 1 and outcome.results[0].type is ResultType.SUCCEEDED
    assert len(outcome.parked) == 4
    assert {r.custom_id for r in outcome.results} | set(outcome.parked) == {r.custom_id for r in requests(5)}


def test_bad_credentials_stop_the_run():
    with running() as (server, _):
        settings = settings_for(server, anthropic_api_key="wrong")
        client = AnthropicMessageClient(settings, sleep=lambda _: None)
        with client:
            outcome = client.send(requests(3))
    assert isinstance(outcome.rejected, AuthenticationFailed)
    assert outcome.results == [] and outcome.parked == []
    assert sorted(outcome.refused) == sorted(r.custom_id for r in requests(3))


def test_count_tokens_counts_what_the_answer_bills():
    request = requests(1)[0]
    with sync_client() as (client, server, _):
        counted = client.count_tokens(request)
        result = client.send_one(request)
        assert server.app.calls["count_tokens"] == 1
    assert result.usage is not None and counted == result.usage.input_tokens > 0


def test_the_bound_holds_however_many_sends_run_at_once():
    """Twelve urgent offers make twelve ``send`` at once: still at most SYNC_CONCURRENCY calls."""
    active, peak, lock = 0, 0, threading.Lock()

    def slow_responder(params):
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.05)
        with lock:
            active -= 1
        return echo_responder(params)

    with sync_client(concurrency=4, responder=slow_responder) as (client, _, _):
        sends = [threading.Thread(target=client.send, args=([request],)) for request in requests(12)]
        for send in sends:
            send.start()
        for send in sends:
            send.join()
    assert peak == 4
