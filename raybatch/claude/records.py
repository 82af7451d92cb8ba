"""Records of the Claude layer: a prepared request, a batch's normalised state, one request's result."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from raybatch.models import BatchStatus, ResultType, Usage


@dataclass(frozen=True)
class PreparedRequest:
    """One chunk's Messages request, ready to pack, encoded once where it was built: ``params_json``
    is its params as sent, ``encoded_size`` its exact size in the batch body, ``input_tokens`` its
    input by the documented counting rule (what a spend cap commits for it). A string travels
    between processes and into a batch body at a fraction of the cost of the nested params.
    Made by ``raybatch.steps.build_requests.prepared_request``."""

    custom_id: str
    job_id: int
    n: int
    first_page: int
    last_page: int
    processing_key: str
    params_json: str
    encoded_size: int
    input_tokens: int

    @property
    def params(self) -> dict[str, Any]:
        """The params, decoded anew on each call: for the few paths that look inside."""
        decoded: dict[str, Any] = json.loads(self.params_json)
        return decoded


@dataclass(frozen=True)
class BatchState:
    """A Message Batch normalised into our model; ``raw`` keeps the payload as received."""

    id: str
    status: BatchStatus
    counts: Mapping[str, int]
    created_at: datetime | None
    ended_at: datetime | None
    results_url: str | None
    raw: Mapping[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def done_fraction(self) -> float:
        """Share of requests no longer processing (0..1)."""
        total = self.total
        return 0.0 if total == 0 else 1.0 - self.counts.get("processing", 0) / total


@dataclass(frozen=True)
class RequestResult:
    """The outcome of one request: the answer text on success, the error type otherwise."""

    custom_id: str
    type: ResultType
    text: str | None = None
    usage: Usage | None = None
    error_type: str | None = None
    error_message: str | None = None
    stop_reason: str | None = None  # why the answer ended: end_turn, or max_tokens when cut short
