"""Helpers for the tests of the emulator and the Claude clients: tiny requests, clients, responders."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import anthropic
from PIL import Image
from pydantic import SecretStr

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer, ManualClock
from raybatch.claude.pagetext import page_text_block, pages_from_params
from raybatch.claude.records import PreparedRequest
from raybatch.settings import ClaudeSettings
from raybatch.steps.build_requests import prepared_request

MODEL = "claude-sonnet-5-5"
API_KEY = "fake-anthropic-key-for-tests"
SCHEMA = {
    "type": "object",
    "properties": {"pages": {"type": "array", "items": {"type": "integer"}}},
    "required": ["pages"],
    "additionalProperties": False,
}


def echo_responder(params: Mapping[str, Any]) -> str:
    """Answers with the page numbers it read: enough to check that each answer fits its request."""
    return json.dumps({"pages": [page for page, _ in pages_from_params(params)]})


def jpeg_base64(width: int, height: int) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buffer, format="JPEG")
    return base64.b64encode(buffer.getvalue()).decode()


def params_for(pages: list[tuple[int, str]], *, image: str | None = None) -> dict[str, Any]:
    """Messages params shaped like the request builder's: page text blocks, optional images, schema."""
    content: list[dict[str, Any]] = []
    source = {"type": "base64", "media_type": "image/jpeg", "data": image}
    for page, text in pages:
        content.append(page_text_block(page, text))
        if image is not None:
            content.append({"type": "image", "source": source})
    return {
        "model": MODEL,
        "max_tokens": 1024,
        "system": "Split the chunk into documents.",
        "messages": [{"role": "user", "content": content}],
        "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}},
    }


def prepared(job_id: int, n: int, *, pages: int = 2) -> PreparedRequest:
    """A PreparedRequest for chunk ``n`` of job ``job_id`` with ``pages`` short pages."""
    first = (n - 1) * pages + 1
    params = params_for([(page, f"text of page {page}") for page in range(first, first + pages)])
    custom_id = f"job_{job_id}_batch_{n}"
    return prepared_request(custom_id, job_id, n, first, first + pages - 1, f"key-{custom_id}", params)


def requests(count: int, job_id: int = 1) -> list[PreparedRequest]:
    return [prepared(job_id, n) for n in range(1, count + 1)]


def settings_for(server: EmulatorServer, **overrides: Any) -> ClaudeSettings:
    values: dict[str, Any] = {"anthropic_api_key": SecretStr(API_KEY), "anthropic_base_url": server.base_url}
    return ClaudeSettings(**{**values, **overrides})


@contextmanager
def running(**config: Any) -> Iterator[tuple[EmulatorServer, ManualClock]]:
    """An emulator on a manual clock, requiring API_KEY, answering with ``echo_responder``."""
    clock = ManualClock()
    values = {"api_key": API_KEY, "clock": clock, "responder": echo_responder, **config}
    with EmulatorServer(EmulatorConfig(**values)) as server:
        yield server, clock


@contextmanager
def sdk(server: EmulatorServer, **options: Any) -> Iterator[anthropic.Anthropic]:
    """A real SDK client on the emulator, without the SDK's own retries unless asked."""
    client = anthropic.Anthropic(api_key=API_KEY, base_url=server.base_url, **{"max_retries": 0, **options})
    try:
        yield client
    finally:
        client.close()


def batch_body(reqs: list[PreparedRequest]) -> Any:
    return [{"custom_id": r.custom_id, "params": dict(r.params)} for r in reqs]
