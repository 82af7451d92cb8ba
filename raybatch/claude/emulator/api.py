"""The emulated HTTP API as plain calls: a routed request in, a reply out. No sockets here."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from raybatch.claude.emulator import wire
from raybatch.claude.emulator.batches import BatchStore, StoredBatch, StoredRequest
from raybatch.claude.emulator.config import EmulatorConfig
from raybatch.claude.emulator.doubt import doubt
from raybatch.claude.emulator.faults import FaultInjector
from raybatch.claude.emulator.model import check_params, cut_at_max_tokens, rules_responder, spoil
from raybatch.claude.emulator.tokens import estimate_input_tokens, estimate_output_tokens, strip_images
from raybatch.ids import CUSTOM_ID_PATTERN

CUSTOM_ID_HEADER = "x-raybatch-custom-id"  # sent with synchronous calls, so answers can be counted
ANSWERS_PATH = "/_emulator/answers"  # GET: the answer counts as JSON (for an emulator in its own process)
_BATCH = r"/v1/messages/batches/(?P<id>[A-Za-z0-9_-]+)"
ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("POST", re.compile(r"/v1/messages"), "messages"),
    ("POST", re.compile(r"/v1/messages/count_tokens"), "count_tokens"),
    ("POST", re.compile(r"/v1/messages/batches"), "create"),
    ("GET", re.compile(r"/v1/messages/batches"), "list"),
    ("GET", re.compile(_BATCH), "retrieve"),
    ("POST", re.compile(_BATCH + "/cancel"), "cancel"),
    ("DELETE", re.compile(_BATCH), "delete"),
    ("GET", re.compile(_BATCH + "/results"), "results"),
]


@dataclass(frozen=True)
class Call:
    """One HTTP request, routed."""

    endpoint: str
    path_args: Mapping[str, str]
    query: Mapping[str, str]
    headers: Mapping[str, str]  # names in lower case
    body: bytes
    base_url: str
    request_id: str


@dataclass
class Reply:
    """What to send back. ``drop`` closes without a response; ``cut_after`` sends that many body bytes."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    cut_after: int | None = None


def json_reply(status: int, payload: Any, headers: Mapping[str, str] | None = None) -> Reply:
    return Reply(status, json.dumps(payload, ensure_ascii=False).encode(), headers=dict(headers or {}))


def error_reply(status: int, kind: str, message: str | None, request_id: str) -> Reply:
    return json_reply(status, wire.error_body(kind, message, request_id))


class BadRequest(Exception):
    """A 400 invalid_request_error with this message."""


class EmulatorApp:
    """Routes, checks credentials and limits, injects faults, and answers each endpoint."""

    def __init__(self, config: EmulatorConfig) -> None:
        self.config = config
        self.injector = FaultInjector(config)
        self.store = BatchStore(config, self.injector)
        self.calls: Counter[str] = Counter()  # requests received per endpoint, faults included
        self._answered: Counter[str] = Counter()  # succeeded Messages answers per custom_id
        self._calls_lock = threading.Lock()

    def answers(self) -> dict[str, int]:
        """Succeeded (paid) answers per custom_id, batch and Messages together: the fault suite's
        check that no request was paid for twice."""
        counts = Counter(self.store.succeeded())
        with self._calls_lock:
            counts.update(self._answered)
        return dict(counts)

    @staticmethod
    def route(method: str, path: str) -> tuple[str, dict[str, str]] | None:
        """(endpoint, path arguments) for a request line, or None when nothing matches."""
        for route_method, pattern, endpoint in ROUTES:
            match = pattern.fullmatch(path)
            if match and route_method == method:
                return endpoint, match.groupdict()
        return None

    def body_limit(self, endpoint: str) -> int:
        """Largest body the API takes on this endpoint."""
        return self.config.max_batch_bytes if endpoint == "create" else self.config.max_message_bytes

    def refuse(self, endpoint: str, headers: Mapping[str, str], request_id: str) -> Reply | None:
        """The reply for a call refused before its body matters: credentials, version, injected faults."""
        with self._calls_lock:
            self.calls[endpoint] += 1
        if not self._authorized(headers):
            return error_reply(401, "authentication_error", None, request_id)
        if self.config.require_version and not headers.get("anthropic-version"):
            message = "anthropic-version: header is required"
            return error_reply(400, "invalid_request_error", message, request_id)
        fault = self.injector.http_fault(endpoint, request_id)
        return json_reply(fault.status, fault.body, fault.headers) if fault else None

    def handle(self, call: Call) -> Reply:
        """Answer a call that passed ``refuse``."""
        try:
            return getattr(self, f"_{call.endpoint}")(call)
        except BadRequest as exc:
            return error_reply(400, "invalid_request_error", str(exc), call.request_id)

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        key = self.config.api_key
        if key is None:
            return True
        bearer = headers.get("authorization") or ""
        return headers.get("x-api-key") == key or bearer == f"Bearer {key}"

    def _messages(self, call: Call) -> Reply:
        params = _json_body(call.body)
        problem = check_params(params)
        if problem:
            raise BadRequest(problem)
        try:
            answer = (self.config.responder or rules_responder)(params)
            answer = doubt(answer, call.headers.get(CUSTOM_ID_HEADER), self.config.faults)
        except Exception:  # a responder bug shows as the API's own internal error
            return error_reply(500, "api_error", None, call.request_id)
        kind = self.injector.malformed_message()
        if kind is not None:
            answer = spoil(answer, kind, self.injector.rng())
        answer, stop = cut_at_max_tokens(answer, params)
        tokens = estimate_input_tokens(params, self.config.image_token_cap)
        usage = wire.usage_body(tokens, estimate_output_tokens(answer), "standard")
        custom_id = call.headers.get(CUSTOM_ID_HEADER)
        if custom_id:
            with self._calls_lock:
                self._answered[custom_id] += 1
        return json_reply(200, wire.message_body(params["model"], answer, usage, stop))

    def _count_tokens(self, call: Call) -> Reply:
        params = _json_body(call.body)
        if not isinstance(params.get("messages"), list) or not isinstance(params.get("model"), str):
            raise BadRequest("model and messages are required")
        return json_reply(200, {"input_tokens": estimate_input_tokens(params, self.config.image_token_cap)})

    def _create(self, call: Call) -> Reply:
        items = _batch_items(_json_body(call.body), self.config.max_batch_requests)
        batch = self.store.add([self._stored(item) for item in items])
        if self.injector.take("drop_create_responses"):
            return Reply(200, drop=True)
        return json_reply(200, self.store.view(batch, call.base_url))

    def _stored(self, item: Mapping[str, Any]) -> StoredRequest:
        params = item["params"]
        return StoredRequest(
            custom_id=item["custom_id"],
            params=params if self.config.keep_images else strip_images(params),
            plan=self.injector.plan(item["custom_id"]),
            due=0.0,
            input_tokens=estimate_input_tokens(params, self.config.image_token_cap),
            problem=check_params(params),
        )

    def _list(self, call: Call) -> Reply:
        limit = _int_arg(call.query, "limit", 20, 1, 1000)
        window = _window(self.store.newest_first(), call.query)
        page = window[-limit:] if call.query.get("before_id") else window[:limit]
        data = [self.store.view(batch, call.base_url) for batch in page]
        return json_reply(200, wire.page_body(data, has_more=len(window) > limit))

    def _retrieve(self, call: Call) -> Reply:
        batch = self._batch(call)
        if batch is None or self._hide_new(batch):
            return error_reply(404, "not_found_error", None, call.request_id)
        return json_reply(200, self.store.view(batch, call.base_url))

    def _hide_new(self, batch: StoredBatch) -> bool:
        with batch.lock:
            if batch.not_found_left > 0:
                batch.not_found_left -= 1
                return True
            return False

    def _cancel(self, call: Call) -> Reply:
        batch = self._batch(call)
        if batch is None:
            return error_reply(404, "not_found_error", None, call.request_id)
        self.store.cancel(batch)
        return json_reply(200, self.store.view(batch, call.base_url))

    def _delete(self, call: Call) -> Reply:
        batch = self._batch(call)
        if batch is None:
            return error_reply(404, "not_found_error", None, call.request_id)
        if not self.store.ended(batch):
            raise BadRequest("A Message Batch can only be deleted once it has ended; cancel it first.")
        self.store.delete(batch.id)
        return json_reply(200, {"id": batch.id, "type": "message_batch_deleted"})

    def _results(self, call: Call) -> Reply:
        batch = self._batch(call)
        if batch is None:
            return error_reply(404, "not_found_error", None, call.request_id)
        if not self.store.ended(batch):
            raise BadRequest("Results are available only once the Message Batch has ended.")
        lines = self.store.result_lines(batch)
        cut = self.injector.cut_results()
        cut_after = sum(len(line) for line in lines[:cut]) if cut is not None else None
        return Reply(200, b"".join(lines), content_type="application/binary", cut_after=cut_after)

    def _batch(self, call: Call) -> StoredBatch | None:
        return self.store.get(call.path_args["id"])


def _json_body(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest("The request body is not valid JSON.") from exc
    if not isinstance(data, dict):
        raise BadRequest("The request body must be a JSON object.")
    return data


def _batch_items(body: Mapping[str, Any], max_requests: int) -> list[Mapping[str, Any]]:
    """The requests of a create call, checked as the API checks them up front."""
    items = body.get("requests")
    if not isinstance(items, list) or not items:
        raise BadRequest("requests: List should have at least 1 item")
    if len(items) > max_requests:
        raise BadRequest(f"requests: a Message Batch holds at most {max_requests} requests")
    seen: set[str] = set()
    for index, item in enumerate(items):
        custom_id = item.get("custom_id") if isinstance(item, Mapping) else None
        if not isinstance(custom_id, str) or not CUSTOM_ID_PATTERN.match(custom_id):
            pattern = CUSTOM_ID_PATTERN.pattern
            raise BadRequest(f"requests.{index}.custom_id: String should match pattern '{pattern}'")
        if custom_id in seen:
            raise BadRequest(f"requests.{index}.custom_id: custom_id values must be unique within a batch")
        if not isinstance(item.get("params"), Mapping):
            raise BadRequest(f"requests.{index}.params: Field required")
        seen.add(custom_id)
    return items


def _int_arg(query: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = query.get(name)
    try:
        value = default if raw is None else int(raw)
    except ValueError as exc:
        raise BadRequest(f"{name}: Input should be a valid integer") from exc
    if not low <= value <= high:
        raise BadRequest(f"{name}: Input should be between {low} and {high}")
    return value


def _window(items: list[StoredBatch], query: Mapping[str, str]) -> list[StoredBatch]:
    """Batches on the cursor's side, newest first: older after ``after_id``, newer before ``before_id``."""
    ids = [batch.id for batch in items]
    if after := query.get("after_id"):
        return items[ids.index(after) + 1 :] if after in ids else []
    if before := query.get("before_id"):
        return items[: ids.index(before)] if before in ids else []
    return items
