"""Every emulator endpoint answers in the API's wire format: each body validates with the SDK's types."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from typing import Any

import anthropic
import pytest
from anthropic.types import Message, MessageTokensCount
from anthropic.types.messages import DeletedMessageBatch, MessageBatch, MessageBatchIndividualResponse
from anthropic.types.shared import ErrorResponse
from emulator_support import API_KEY, batch_body, params_for, requests, running, sdk

from raybatch.claude.emulator import EmulatorServer


def _strict(model: Any, payload: Any) -> Any:
    """Validate (not just construct) a payload with an SDK model: every field type is checked."""
    return model.model_validate(payload)


def _created(client: anthropic.Anthropic, count: int = 3) -> MessageBatch:
    return client.messages.batches.create(requests=batch_body(requests(count)))


def test_messages_answer_validates_as_message_with_request_id():
    with running() as (server, _), sdk(server) as client:
        raw = client.messages.with_raw_response.create(**params_for([(1, "hello"), (2, "world")]))
        message = _strict(Message, raw.json())
    assert raw.headers["request-id"].startswith("req_")
    assert message.content[0].type == "text"
    assert json.loads(message.content[0].text) == {"pages": [1, 2]}
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert message.usage.service_tier == "standard"


def test_count_tokens_validates_and_matches_messages_usage():
    params = params_for([(1, "some page text " * 40)])
    with running() as (server, _), sdk(server) as client:
        counted = _strict(MessageTokensCount, client.messages.with_raw_response.count_tokens(
            model=params["model"], messages=params["messages"], system=params["system"],
            output_config=params["output_config"],
        ).json())  # fmt: skip
        message = client.messages.create(**params)
    assert counted.input_tokens == message.usage.input_tokens


def test_create_retrieve_list_cancel_validate_as_message_batch():
    with running(processing_seconds=10) as (server, _), sdk(server) as client:
        raw = client.messages.batches.with_raw_response
        created = _strict(MessageBatch, raw.create(requests=batch_body(requests(3))).json())
        retrieved = _strict(MessageBatch, raw.retrieve(created.id).json())
        listed = raw.list().json()
        canceled = _strict(MessageBatch, raw.cancel(created.id).json())
    assert created.id.startswith("msgbatch_") and created.processing_status == "in_progress"
    assert created.request_counts.processing == 3 and created.results_url is None
    assert retrieved.id == created.id
    assert [_strict(MessageBatch, item).id for item in listed["data"]] == [created.id]
    assert canceled.processing_status == "canceling" and canceled.cancel_initiated_at is not None


def test_results_lines_validate_and_results_url_points_at_the_emulator():
    with running(processing_seconds=0) as (server, _), sdk(server) as client:
        batch = _created(client, 4)
        assert batch.results_url == f"{server.base_url}/v1/messages/batches/{batch.id}/results"
        body = client.messages.batches.with_raw_response.results(batch.id).read()
    lines = body.decode().split("\n")
    assert lines[-1] == "" and all(lines[:-1]), "JSONL ends with a newline and has no blank lines"
    parsed = [_strict(MessageBatchIndividualResponse, json.loads(line)) for line in lines[:-1]]
    assert sorted(p.custom_id for p in parsed) == sorted(r.custom_id for r in requests(4))
    assert {p.result.type for p in parsed} == {"succeeded"}
    assert {p.result.message.usage.service_tier for p in parsed} == {"batch"}


def test_delete_validates_and_only_ended_batches_can_be_deleted():
    with running(processing_seconds=10) as (server, clock), sdk(server) as client:
        batch = _created(client)
        with pytest.raises(anthropic.BadRequestError):
            client.messages.batches.delete(batch.id)
        clock.advance(10)
        raw = client.messages.batches.with_raw_response
        deleted = _strict(DeletedMessageBatch, raw.delete(batch.id).json())
        with pytest.raises(anthropic.NotFoundError):
            client.messages.batches.retrieve(batch.id)
    assert deleted.id == batch.id


def _error(exc_info: pytest.ExceptionInfo[anthropic.APIStatusError]) -> ErrorResponse:
    error = exc_info.value
    assert error.request_id and error.request_id.startswith("req_")
    return _strict(ErrorResponse, error.body)


def test_wrong_key_is_401_and_both_auth_headers_are_accepted():
    with running() as (server, _):
        wrong = anthropic.Anthropic(api_key="wrong", base_url=server.base_url, max_retries=0)
        with wrong as client, pytest.raises(anthropic.AuthenticationError) as info:
            client.messages.batches.list()
        assert _error(info).error.type == "authentication_error"
        for headers in ({"x-api-key": API_KEY, "Authorization": anthropic.omit}, {}):  # x-api-key, Bearer
            with sdk(server, default_headers=headers) as client:
                assert client.messages.batches.list().data == []


@pytest.mark.parametrize(
    ("custom_ids", "fragment"),
    [(["ok_1", "bad id!"], "custom_id"), (["same", "same"], "unique"), (["x" * 65], "custom_id")],
)
def test_create_rejects_bad_or_repeated_custom_ids(custom_ids, fragment):
    params = params_for([(1, "a")])
    with running() as (server, _), sdk(server) as client:
        with pytest.raises(anthropic.BadRequestError) as info:
            client.messages.batches.create(requests=[{"custom_id": c, "params": params} for c in custom_ids])
        assert fragment in _error(info).error.message
        assert client.messages.batches.list().data == []


def test_create_rejects_too_many_requests_and_too_large_bodies():
    with running(max_batch_requests=2, max_batch_bytes=20_000) as (server, _), sdk(server) as client:
        with pytest.raises(anthropic.BadRequestError) as info:
            client.messages.batches.create(requests=batch_body(requests(3)))
        assert _error(info).error.type == "invalid_request_error"
        big = [{"custom_id": "big", "params": params_for([(1, "x" * 30_000)])}]
        with pytest.raises(anthropic.ContentTooLargeError) as too_large:
            client.messages.batches.create(requests=big)
        assert too_large.value.type == "request_too_large"
        assert too_large.value.body["type"] == "error"
        assert client.messages.batches.list().data == []


def test_missing_batch_is_404_not_found_error():
    with running() as (server, _), sdk(server) as client, pytest.raises(anthropic.NotFoundError) as info:
        client.messages.batches.retrieve("msgbatch_01nope")
    assert _error(info).error.type == "not_found_error"


def test_invalid_messages_params_are_400():
    with running() as (server, _), sdk(server) as client, pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model="claude-sonnet-5-5", max_tokens=10, messages=[])
    assert _error(info).error.type == "invalid_request_error"


def test_pagination_follows_before_and_after_cursors():
    with running() as (server, _), sdk(server) as client:
        ids = [_created(client, 1).id for _ in range(5)]
        newest_first = ids[::-1]
        first = client.messages.batches.list(limit=2)
        assert [b.id for b in first.data] == newest_first[:2]
        assert (first.has_more, first.first_id, first.last_id) == (True, newest_first[0], newest_first[1])
        after = client.messages.batches.list(limit=2, after_id=newest_first[1])
        assert [b.id for b in after.data] == newest_first[2:4] and after.has_more
        last = client.messages.batches.list(limit=2, after_id=newest_first[3])
        assert [b.id for b in last.data] == newest_first[4:] and not last.has_more
        before = client.messages.batches.list(limit=2, before_id=newest_first[4])
        assert [b.id for b in before.data] == newest_first[2:4] and before.has_more
        assert [b.id for b in client.messages.batches.list(limit=2)] == newest_first  # SDK auto-paging
        with pytest.raises(anthropic.BadRequestError):
            client.messages.batches.list(limit=0)


def test_every_response_carries_a_request_id_and_a_version_is_required():
    with running() as (server, _), sdk(server) as client:
        raw = client.messages.batches.with_raw_response.list()
        assert raw.headers["request-id"].startswith("req_")
        with pytest.raises(anthropic.BadRequestError) as info:
            client.messages.batches.list(extra_headers={"anthropic-version": ""})
        assert "anthropic-version" in _error(info).error.message


def test_stop_joins_threads_with_an_idle_keep_alive_connection_open():
    before = set(threading.enumerate())
    server = EmulatorServer().start()
    client = anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0)
    client.messages.batches.list()  # leaves a pooled keep-alive connection, and its handler thread
    assert len(set(threading.enumerate()) - before) == 2
    server.stop()
    client.close()
    assert set(threading.enumerate()) - before == set()
    with pytest.raises(RuntimeError):
        _ = server.base_url


def test_serve_runs_in_its_own_process_until_interrupted():
    script = (
        "from raybatch.claude.emulator import EmulatorConfig, serve\n"
        "serve('127.0.0.1', 0, EmulatorConfig(processing_seconds=0))\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline() if process.stdout else ""
        base_url = line.strip().rsplit(" ", 1)[-1]
        assert base_url.startswith("http://127.0.0.1:"), line
        with anthropic.Anthropic(api_key="k", base_url=base_url, max_retries=0) as client:
            assert client.messages.batches.list().data == []
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout:
            process.stdout.close()
