"""The API's JSON shapes: ids, timestamps, error bodies, messages, usage, batches."""

from __future__ import annotations

import secrets
import string
from datetime import UTC, datetime
from typing import Any

_ALPHABET = string.ascii_letters + string.digits

# The API's own wording for the errors the emulator gives.
MESSAGES = {
    "authentication_error": "invalid x-api-key",
    "not_found_error": "Not found",
    "rate_limit_error": "This request would exceed the rate limit for your organization. Please retry later.",
    "overloaded_error": "Overloaded",
    "api_error": "Internal server error",
    "request_too_large": "Request exceeds the maximum allowed number of bytes.",
}
SPEND_LIMIT_MESSAGES = {
    "enforced": "Your organization has reached its monthly usage limit for its API tier.",
    "workspace": "You have reached your specified workspace API usage limits. "
    "You will regain access on 2026-12-01 at 00:00 UTC.",
    "credit": "Your credit balance is too low to access the Anthropic API. "
    "Please go to Plans & Billing to upgrade or purchase credits.",
}


def new_id(prefix: str) -> str:
    """A fresh id shaped like the API's: ``msgbatch_01…``, ``msg_01…``, ``req_011C…``."""
    lead = "011C" if prefix == "req" else "01"
    # One read of random bytes, not one per character (an id per answer adds up over a backlog).
    return f"{prefix}_{lead}" + "".join(_ALPHABET[b % len(_ALPHABET)] for b in secrets.token_bytes(22))


def rfc3339(epoch_seconds: float) -> str:
    """A UTC timestamp as the API writes it: ``2026-11-30T12:00:00.123456Z``."""
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def error_body(kind: str, message: str | None, request_id: str | None, **details: str) -> dict[str, Any]:
    """The API's error envelope; ``details`` (e.g. ``error_code``) go in ``error.details``."""
    error: dict[str, Any] = {"type": kind, "message": message or MESSAGES.get(kind, kind)}
    if details:
        error["details"] = dict(details)
    return {"type": "error", "error": error, "request_id": request_id}


def usage_body(input_tokens: int, output_tokens: int, service_tier: str) -> dict[str, Any]:
    """A Message's ``usage``."""
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "service_tier": service_tier,
    }


def message_body(
    model: str, text: str, usage: dict[str, Any], stop_reason: str = "end_turn"
) -> dict[str, Any]:
    """A complete Message whose answer is one text block (cut short when ``stop_reason`` says so)."""
    return {
        "id": new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


def page_body(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    """One page of a list endpoint."""
    return {
        "data": data,
        "has_more": has_more,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }
