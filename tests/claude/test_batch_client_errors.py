"""sdk_errors: each API failure, met through the real SDK, becomes the right raybatch error."""

from __future__ import annotations

import socket
from email.utils import formatdate

import anthropic
import pytest
from emulator_support import batch_body, params_for, requests, running, sdk

from raybatch.claude.emulator import Faults, SpendLimitKind
from raybatch.claude.sdk_errors import api_error_type, retry_after_seconds, sdk_errors
from raybatch.errors import (
    AuthenticationFailed,
    InvalidRequest,
    Overloaded,
    RateLimited,
    ResourceNotFound,
    SpendLimitReached,
    TransientError,
    UpstreamUnavailable,
)


def _translated(server_faults: Faults, call) -> Exception:
    with (
        running(faults=server_faults, max_batch_bytes=10_000) as (server, _),
        sdk(server) as client,
        pytest.raises(Exception) as info,
        sdk_errors("test call"),
    ):
        call(client)
    return info.value


def _message(client: anthropic.Anthropic) -> None:
    client.messages.create(**params_for([(1, "page text that must not leak")]))


@pytest.mark.parametrize("kind", list(SpendLimitKind))
def test_every_spend_limit_answer_is_spend_limit_reached(kind):
    error = _translated(Faults(spend_limit=True, spend_limit_kind=kind), _message)
    assert isinstance(error, SpendLimitReached) and not isinstance(error, TransientError)


@pytest.mark.parametrize(
    ("faults", "expected", "retry_after"),
    [
        (Faults(rate_limit_times=1, retry_after=0.25), RateLimited, 0.25),
        (Faults(rate_limit_times=1, retry_after=3), RateLimited, 3.0),
        (Faults(overloaded_times=1), Overloaded, None),
        (Faults(server_error_times=1), UpstreamUnavailable, None),
    ],
)
def test_transient_statuses_carry_retry_after(faults, expected, retry_after):
    error = _translated(faults, _message)
    assert type(error) is expected and error.retry_after == retry_after
    assert "request req_" in str(error)
    assert "must not leak" not in str(error)


def test_permanent_statuses():
    missing = _translated(Faults(), lambda c: c.messages.batches.retrieve("msgbatch_01x"))
    assert isinstance(missing, ResourceNotFound)
    bad = _translated(Faults(), lambda c: c.messages.create(model="m", max_tokens=1, messages=[]))
    assert type(bad) is InvalidRequest
    big = [{"custom_id": "big", "params": params_for([(1, "x" * 20_000)])}]
    assert type(_translated(Faults(), lambda c: c.messages.batches.create(requests=big))) is InvalidRequest
    with (
        running(api_key="other") as (server, _),
        sdk(server) as client,
        pytest.raises(AuthenticationFailed),
        sdk_errors("test call"),
    ):
        client.messages.batches.create(requests=batch_body(requests(1)))


def test_connection_refused_is_upstream_unavailable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = anthropic.Anthropic(api_key="k", base_url=f"http://127.0.0.1:{port}", max_retries=0)
    with client, pytest.raises(UpstreamUnavailable), sdk_errors("test call"):
        client.messages.batches.list()


def test_retry_after_header_forms():
    assert retry_after_seconds({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_seconds({"retry-after": "7"}) == 7.0
    assert retry_after_seconds({}) is None
    in_a_minute = retry_after_seconds({"retry-after": formatdate(usegmt=True, timeval=None)})
    assert in_a_minute is not None and 0.0 <= in_a_minute <= 1.0


def test_api_error_type_names():
    assert api_error_type(RateLimited("x")) == "rate_limit_error"
    assert api_error_type(Overloaded("x")) == "overloaded_error"
    assert api_error_type(UpstreamUnavailable("x")) == "api_error"
    assert api_error_type(InvalidRequest("x")) == "invalid_request_error"
