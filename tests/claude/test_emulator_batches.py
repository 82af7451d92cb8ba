"""The emulator's behaviour: batches on its clock, cancel and expiry, and every fault knob."""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter

import anthropic
import pytest
from emulator_support import batch_body, echo_responder, jpeg_base64, params_for, requests, running, sdk

from raybatch.claude.emulator import (
    EmulatorConfig,
    Faults,
    MalformedKind,
    SpendLimitKind,
    add_emulator_arguments,
    config_from_arguments,
)
from raybatch.claude.emulator.model import spoil
from raybatch.claude.emulator.tokens import estimate_input_tokens, image_tokens
from raybatch.errors import ConfigError


def _counts(batch) -> dict[str, int]:
    return batch.request_counts.to_dict()


def _results(client: anthropic.Anthropic, batch_id: str) -> list:
    return list(client.messages.batches.results(batch_id))


def test_batch_progresses_on_the_clock_then_ends_with_results():
    with running(processing_seconds=10) as (server, clock), sdk(server) as client:
        batch = client.messages.batches.create(requests=batch_body(requests(4)))
        clock.advance(5)  # half the requests are due
        halfway = client.messages.batches.retrieve(batch.id)
        clock.advance(5)
        ended = client.messages.batches.retrieve(batch.id)
        results = _results(client, batch.id)
    assert halfway.processing_status == "in_progress" and _counts(halfway)["processing"] == 2
    assert _counts(halfway)["succeeded"] == 2
    assert ended.processing_status == "ended" and ended.ended_at is not None
    assert _counts(ended) == {"processing": 0, "succeeded": 4, "errored": 0, "canceled": 0, "expired": 0}
    by_id = {r.custom_id: json.loads(r.result.message.content[0].text) for r in results}
    assert by_id == {r.custom_id: {"pages": [r.first_page, r.last_page]} for r in requests(4)}


def test_faithful_counts_stay_processing_until_the_batch_ends():
    with running(processing_seconds=10, progressive_counts=False) as (server, clock), sdk(server) as client:
        batch = client.messages.batches.create(requests=batch_body(requests(4)))
        clock.advance(9)
        assert _counts(client.messages.batches.retrieve(batch.id))["processing"] == 4


def test_cancel_keeps_processed_results_and_cancels_the_rest():
    with running(processing_seconds=10, cancel_seconds=1) as (server, clock), sdk(server) as client:
        batch = client.messages.batches.create(requests=batch_body(requests(4)))
        clock.advance(5)
        assert client.messages.batches.cancel(batch.id).processing_status == "canceling"
        clock.advance(1)
        ended = client.messages.batches.retrieve(batch.id)
        kinds = Counter(r.result.type for r in _results(client, batch.id))
    assert ended.processing_status == "ended" and ended.cancel_initiated_at is not None
    assert _counts(ended)["succeeded"] == 2 and _counts(ended)["canceled"] == 2
    assert kinds == {"succeeded": 2, "canceled": 2}


def test_requests_not_done_by_expiry_expire():
    with running(processing_seconds=10, expiry_seconds=5) as (server, clock), sdk(server) as client:
        batch = client.messages.batches.create(requests=batch_body(requests(4)))
        clock.advance(5)
        ended = client.messages.batches.retrieve(batch.id)
    assert ended.processing_status == "ended"
    assert _counts(ended)["succeeded"] == 2 and _counts(ended)["expired"] == 2


def test_result_faults_by_id_and_by_fraction_end_each_request_as_told():
    faults = Faults(
        errored_ids=frozenset({"job_1_batch_1"}),
        errored_type="overloaded_error",
        expired_ids=frozenset({"job_1_batch_2"}),
        canceled_ids=frozenset({"job_1_batch_3"}),
    )
    with running(processing_seconds=0, faults=faults) as (server, _), sdk(server) as client:
        batch = client.messages.batches.create(requests=batch_body(requests(5)))
        results = {r.custom_id: r.result for r in _results(client, batch.id)}
        ended = client.messages.batches.retrieve(batch.id)
        server.faults = Faults(seed=7, errored_fraction=0.5)
        drawn = client.messages.batches.create(requests=batch_body(requests(40, job_id=2)))
        drawn_kinds = Counter(r.result.type for r in _results(client, drawn.id))
    assert results["job_1_batch_1"].type == "errored"
    assert results["job_1_batch_1"].error.error.type == "overloaded_error"
    rest = [results[f"job_1_batch_{n}"].type for n in (2, 3, 4, 5)]
    assert rest == ["expired", "canceled", "succeeded", "succeeded"]
    assert _counts(ended) == {"processing": 0, "succeeded": 2, "errored": 1, "canceled": 1, "expired": 1}
    assert 8 <= drawn_kinds["errored"] <= 32 and drawn_kinds["errored"] + drawn_kinds["succeeded"] == 40


def test_invalid_params_in_a_batch_end_as_errored_invalid_request():
    body = batch_body(requests(2))
    body[0]["params"] = {**body[0]["params"], "max_tokens": 0}
    with running(processing_seconds=0) as (server, _), sdk(server) as client:
        batch = client.messages.batches.create(requests=body)
        results = {r.custom_id: r.result for r in _results(client, batch.id)}
    assert results["job_1_batch_1"].error.error.type == "invalid_request_error"
    assert results["job_1_batch_2"].type == "succeeded"


@pytest.mark.parametrize("kind", [k for k in MalformedKind if k is not MalformedKind.MIXED])
def test_malformed_answers_are_delivered_as_such(kind):
    faults = Faults(malformed_ids=frozenset({"job_1_batch_1"}), malformed_kind=kind)
    with running(processing_seconds=0, faults=faults) as (server, _), sdk(server) as client:
        batch = client.messages.batches.create(requests=batch_body(requests(2)))
        texts = {r.custom_id: r.result.message.content[0].text for r in _results(client, batch.id)}
    assert json.loads(texts["job_1_batch_2"]) == {"pages": [3, 4]}
    with pytest.raises(json.JSONDecodeError):
        json.loads(texts["job_1_batch_1"])
    if kind is not MalformedKind.GARBAGE:
        assert '"pages"' in texts["job_1_batch_1"], "near-JSON keeps the answer inside"


def test_spoil_trailing_comma_is_one_comma_away_from_the_answer():
    answer = '{"a": 1}'
    spoiled = spoil(answer, MalformedKind.TRAILING_COMMA, random.Random(0))
    assert spoiled == '{"a": 1,}' and json.loads(spoiled.replace(",}", "}")) == {"a": 1}


def test_duplicated_lines_arrive_twice_and_identical():
    faults = Faults(duplicate_fraction=1.0)
    with running(processing_seconds=0, faults=faults) as (server, _), sdk(server) as client:
        batch = client.messages.batches.create(requests=batch_body(requests(3)))
        lines = _results(client, batch.id)
    assert Counter(r.custom_id for r in lines) == {r.custom_id: 2 for r in requests(3)}
    first: dict[str, str] = {}
    for line in lines:
        text = line.result.message.content[0].text
        assert first.setdefault(line.custom_id, text) == text


def test_http_faults_fire_as_counted_with_the_api_bodies_and_headers():
    faults = Faults(rate_limit_times=1, retry_after=0.25, overloaded_times=1, server_error_times=1)
    with running(faults=faults) as (server, _), sdk(server) as client:
        with pytest.raises(anthropic.RateLimitError) as limited:
            client.messages.batches.list()
        with pytest.raises(anthropic.OverloadedError) as overloaded:
            client.messages.batches.list()
        with pytest.raises(anthropic.InternalServerError) as broken:
            client.messages.batches.list()
        client.messages.batches.list()  # all counters spent
    assert limited.value.response.headers["retry-after-ms"] == "250"
    assert limited.value.response.headers["retry-after"] == "1"
    assert limited.value.type == "rate_limit_error"
    assert (overloaded.value.status_code, overloaded.value.type) == (529, "overloaded_error")
    assert (broken.value.status_code, broken.value.type) == (500, "api_error")


def test_http_faults_can_be_limited_to_some_endpoints():
    faults = Faults(server_error_fraction=1.0, endpoints=frozenset({"messages"}))
    with running(faults=faults) as (server, _), sdk(server) as client:
        client.messages.batches.list()
        with pytest.raises(anthropic.InternalServerError):
            client.messages.create(**params_for([(1, "a")]))


@pytest.mark.parametrize(
    ("kind", "status", "error_code"),
    [
        (SpendLimitKind.ENFORCED, 429, "enforced_spend_limit_reached"),
        (SpendLimitKind.WORKSPACE, 400, None),
        (SpendLimitKind.CREDIT, 400, None),
    ],
)
def test_spend_limit_answers_like_the_api(kind, status, error_code):
    faults = Faults(spend_limit=True, spend_limit_kind=kind)
    with running(faults=faults) as (server, _), sdk(server) as client:
        with pytest.raises(anthropic.APIStatusError) as info:
            client.messages.create(**params_for([(1, "a")]))
        client.messages.batches.list()  # reads are not billed: unaffected
    assert info.value.status_code == status and info.value.error_code == error_code
    assert "retry-after" not in info.value.response.headers


def test_latency_is_added_before_every_response():
    slept: list[float] = []
    with running(sleep=slept.append, faults=Faults(latency=0.3)) as (server, _), sdk(server) as client:
        client.messages.batches.list()
    assert slept == [0.3]


def test_token_estimates_follow_the_documented_image_rule():
    small, large = jpeg_base64(300, 200), jpeg_base64(1568, 1568)
    assert image_tokens({"type": "base64", "data": small}, cap=1600) == 80  # 300*200/750
    assert image_tokens({"type": "base64", "data": large}, cap=1600) == 1600
    assert image_tokens({"type": "url", "url": "https://x"}, cap=1600) == 1600
    text_only = estimate_input_tokens(params_for([(1, "abcd" * 100)]), 1600)
    with_image = estimate_input_tokens(params_for([(1, "abcd" * 100)], image=small), 1600)
    assert with_image - text_only == 80
    with running(processing_seconds=0) as (server, _), sdk(server) as client:
        message = client.messages.create(**params_for([(1, "abcd" * 100)], image=small))
    assert message.usage.input_tokens == with_image


def test_default_responder_answers_from_the_rules():
    rules = pytest.importorskip("raybatch.claude.emulator.rules")
    params = params_for([(1, "INVOICE No. 12\nfrom ACME"), (2, "total 10.00")])
    with running(responder=None) as (server, _), sdk(server) as client:
        message = client.messages.create(**params)
    expected = rules.answer_chunk([(1, "INVOICE No. 12\nfrom ACME"), (2, "total 10.00")])
    assert message.content[0].text == expected.model_dump_json()


def test_config_from_mapping_json_and_cli_flags():
    faults = Faults.from_json('{"seed": 3, "errored_ids": ["a", "b"], "malformed_kind": "prose"}')
    assert faults.errored_ids == frozenset({"a", "b"}) and faults.seed == 3
    assert faults.malformed_kind is MalformedKind.PROSE
    assert spoil("{}", "fenced", random.Random(0)) == "```json\n{}\n```"  # type: ignore[arg-type]
    config = EmulatorConfig.from_mapping({"processing_seconds": 1, "faults": {"latency": 0.5}})
    assert config.processing_seconds == 1 and config.faults.latency == 0.5
    with pytest.raises(ConfigError):
        Faults.from_mapping({"no_such_knob": 1})
    with pytest.raises(ConfigError):
        Faults(endpoints=frozenset({"nowhere"}))
    parser = argparse.ArgumentParser()
    add_emulator_arguments(parser)
    flags = ["--processing-seconds", "0.5", "--faults", '{"rate_limit_times": 2}', "--seed", "9"]
    args = parser.parse_args(flags)
    config = config_from_arguments(args)
    assert (config.processing_seconds, config.faults.rate_limit_times, config.faults.seed) == (0.5, 2, 9)


def test_echo_responder_reads_page_numbers():
    assert json.loads(echo_responder(params_for([(7, "x"), (8, "")]))) == {"pages": [7, 8]}
