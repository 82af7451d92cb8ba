"""What the emulator does: timing, limits, its responder and its fault knobs.

Both objects are plain mutable dataclasses: tests change them on a running emulator
(``server.faults.rate_limit_times = 2``) and the next request sees the change.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from raybatch.claude.emulator.tokens import IMAGE_TOKEN_CAP
from raybatch.errors import ConfigError
from raybatch.units import MIB

Responder = Callable[[Mapping[str, Any]], str]
"""A model stand-in: Messages params in, the answer's text out."""

# Endpoint names the HTTP faults can be limited to (Faults.endpoints).
ENDPOINTS = frozenset(
    {"messages", "count_tokens", "create", "list", "retrieve", "cancel", "delete", "results"}
)
# Errored-result types a batch request can end with; the API's own names.
RESULT_ERROR_TYPES = frozenset({"invalid_request_error", "api_error", "overloaded_error"})


class MalformedKind(StrEnum):
    """How a malformed answer is spoiled: near-JSON (repairable) or plain garbage."""

    PROSE = "prose"  # the JSON wrapped in a sentence before and after
    FENCED = "fenced"  # the JSON in a ```json fence
    TRAILING_COMMA = "trailing_comma"  # a comma before the closing brace
    GARBAGE = "garbage"  # no JSON at all
    MIXED = "mixed"  # one of the above, drawn per answer


class SpendLimitKind(StrEnum):
    """Which of the API's spend-limit answers to give."""

    ENFORCED = "enforced"  # 429 rate_limit_error, details.error_code enforced_spend_limit_reached
    WORKSPACE = "workspace"  # 400 invalid_request_error: a spend limit the user set on a workspace
    CREDIT = "credit"  # 400 invalid_request_error: prepaid credit balance too low


@dataclass
class Faults:
    """Fault knobs, all off by default. ``*_times`` count down as they fire; fractions draw from ``seed``."""

    seed: int = 0
    latency: float = 0.0  # seconds added before every response
    endpoints: frozenset[str] | None = None  # endpoints the HTTP faults hit; None = all of them
    rate_limit_times: int = 0  # 429 rate_limit_error with retry-after
    rate_limit_fraction: float = 0.0
    retry_after: float = 1.0  # seconds, sent as retry-after (and retry-after-ms when fractional)
    overloaded_times: int = 0  # 529 overloaded_error
    overloaded_fraction: float = 0.0
    server_error_times: int = 0  # 500 api_error
    server_error_fraction: float = 0.0
    spend_limit: bool = False  # every messages/create call answers the spend-limit error while on
    spend_limit_kind: SpendLimitKind = SpendLimitKind.ENFORCED
    not_found_after_create: int = 0  # the first N retrieves of each new batch answer 404
    drop_create_responses: int = 0  # creates that make the batch, then close without a response
    cut_results_after: int | None = None  # close the results stream after this many lines
    cut_results_times: int = 1  # how many results streams are cut
    errored_fraction: float = 0.0  # batch requests that end errored with ``errored_type``
    errored_ids: frozenset[str] = frozenset()
    errored_type: str = "api_error"
    expired_fraction: float = 0.0  # batch requests that end expired
    expired_ids: frozenset[str] = frozenset()
    canceled_fraction: float = 0.0  # batch requests that end canceled
    canceled_ids: frozenset[str] = frozenset()
    malformed_fraction: float = 0.0  # answers spoiled as ``malformed_kind`` (batch and messages)
    malformed_ids: frozenset[str] = frozenset()
    malformed_kind: MalformedKind = MalformedKind.MIXED
    duplicate_fraction: float = 0.0  # result lines sent twice
    # Doubt (raybatch.claude.emulator.doubt): answers made wrong or unsure, drawn by custom_id
    wrong_split_fraction: float = 0.0
    wrong_class_fraction: float = 0.0
    wrong_field_fraction: float = 0.0
    low_confidence_fraction: float = 0.0

    def __post_init__(self) -> None:
        # Values from JSON arrive as strings and lists: make them the declared types.
        self.malformed_kind = MalformedKind(self.malformed_kind)
        self.spend_limit_kind = SpendLimitKind(self.spend_limit_kind)
        for name in ("errored_ids", "expired_ids", "canceled_ids", "malformed_ids"):
            setattr(self, name, frozenset(getattr(self, name)))
        if self.endpoints is not None:
            self.endpoints = frozenset(self.endpoints)
        if self.endpoints is not None and not set(self.endpoints) <= ENDPOINTS:
            raise ConfigError(f"unknown endpoints in faults: {sorted(set(self.endpoints) - ENDPOINTS)}")
        if self.errored_type not in RESULT_ERROR_TYPES:
            raise ConfigError(f"errored_type must be one of {sorted(RESULT_ERROR_TYPES)}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Faults:
        """Faults from a mapping (e.g. parsed JSON); lists become sets, unknown names are an error."""
        return _from_mapping(cls, data)

    @classmethod
    def from_json(cls, text: str) -> Faults:
        """Faults from a JSON object."""
        return cls.from_mapping(_json_object(text))


@dataclass
class EmulatorConfig:
    """How the emulator behaves: credentials, processing clock, the API's limits, responder, faults."""

    api_key: str | None = None  # when set, requests must carry it (Bearer or x-api-key)
    processing_seconds: float = 2.0  # a batch's requests finish evenly over this time
    progressive_counts: bool = True  # False: counts stay "processing" until the batch ends, as the API
    cancel_seconds: float = 0.5  # time from cancel to ended
    expiry_seconds: float = 24 * 3600.0
    max_batch_requests: int = 100_000
    max_batch_bytes: int = 256 * MIB  # the looser reading of "256 MB"; the packer keeps to the stricter
    max_message_bytes: int = 32 * MIB
    image_token_cap: int = IMAGE_TOKEN_CAP  # an image counts width*height/750 tokens, at most this
    keep_images: bool = False  # False: image data is dropped once counted, to keep batches small
    require_version: bool = True  # answer 400 without an anthropic-version header, as the API
    public_url: str | None = None  # base of results_url; default: the Host the client used
    responder: Responder | None = None  # None: the rule-based default model
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    faults: Faults = field(default_factory=Faults)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> EmulatorConfig:
        """A config from plain values (e.g. CLI or JSON); ``faults`` may be a nested mapping."""
        values = dict(data)
        faults = values.pop("faults", None)
        config = _from_mapping(cls, values, skip={"responder", "clock", "sleep", "faults"})
        if faults is not None:
            config.faults = faults if isinstance(faults, Faults) else Faults.from_mapping(faults)
        return config


def _from_mapping(kind: type[Any], data: Mapping[str, Any], skip: Set[str] = frozenset()) -> Any:
    names = {f.name: f for f in dataclasses.fields(kind) if f.name not in skip}
    unknown = set(data) - set(names)
    if unknown:
        raise ConfigError(f"unknown {kind.__name__} settings: {sorted(unknown)}")
    try:
        return kind(**data)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"invalid {kind.__name__}: {exc}") from exc


def _json_object(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON: {exc.msg}") from exc
    if not isinstance(data, dict):
        raise ConfigError("expected a JSON object")
    return data
