"""The emulator's Message Batches, kept in memory and advanced by the config's clock.

Each request has a due time, spread evenly over ``processing_seconds`` from creation. A request
resolves at its due time with its planned outcome, unless a cancel came first (it resolves as
canceled when the cancel completes) or the batch expires first (it resolves as expired). The batch
has ended once every request has resolved; results exist only then.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from raybatch.claude.emulator import wire
from raybatch.claude.emulator.config import EmulatorConfig, Responder
from raybatch.claude.emulator.doubt import doubt
from raybatch.claude.emulator.faults import FaultInjector, RequestPlan
from raybatch.claude.emulator.model import cut_at_max_tokens, rules_responder, spoil
from raybatch.claude.emulator.tokens import estimate_output_tokens
from raybatch.models import ResultType

COUNT_NAMES = ("processing", "succeeded", "errored", "canceled", "expired")


@dataclass
class StoredRequest:
    """One request of a batch: its params (images emptied unless kept), plan and cached answer."""

    custom_id: str
    params: Mapping[str, Any]
    plan: RequestPlan
    due: float
    input_tokens: int
    problem: str | None = None  # why the API rejects these params, found while processing
    line: dict[str, Any] | None = None  # the result line, fixed once first made


@dataclass
class StoredBatch:
    """One batch and what happened to it."""

    id: str
    created: float
    expires: float
    requests: list[StoredRequest]
    cancel_at: float | None = None
    not_found_left: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


class BatchStore:
    """Every batch the emulator knows, newest last; thread-safe."""

    def __init__(self, config: EmulatorConfig, faults: FaultInjector) -> None:
        self._config = config
        self._faults = faults
        self._lock = threading.Lock()
        self._batches: dict[str, StoredBatch] = {}
        self._wall_offset = time.time() - config.clock()

    def now(self) -> float:
        """The config's clock."""
        return self._config.clock()

    def wall(self, at: float) -> str:
        """Clock time ``at`` as an RFC 3339 timestamp."""
        return wire.rfc3339(at + self._wall_offset)

    def add(self, requests: list[StoredRequest]) -> StoredBatch:
        """A new batch of these requests; due times are spread over ``processing_seconds``."""
        created = self.now()
        count = len(requests)
        for index, request in enumerate(requests):
            request.due = created + self._config.processing_seconds * (index + 1) / count
        batch = StoredBatch(
            id=wire.new_id("msgbatch"),
            created=created,
            expires=created + self._config.expiry_seconds,
            requests=requests,
            not_found_left=self._config.faults.not_found_after_create,
        )
        with self._lock:
            self._batches[batch.id] = batch
        return batch

    def get(self, batch_id: str) -> StoredBatch | None:
        with self._lock:
            return self._batches.get(batch_id)

    def delete(self, batch_id: str) -> None:
        with self._lock:
            self._batches.pop(batch_id, None)

    def newest_first(self) -> list[StoredBatch]:
        with self._lock:
            return list(reversed(self._batches.values()))

    def cancel(self, batch: StoredBatch) -> None:
        """Start canceling, unless the batch has ended or is canceling already."""
        with batch.lock:
            if batch.cancel_at is None and not self.ended(batch):
                batch.cancel_at = self.now()

    def resolution(self, batch: StoredBatch, request: StoredRequest) -> tuple[float, ResultType]:
        """When ``request`` resolves and as what."""
        at, outcome = request.due, request.plan.outcome
        if batch.cancel_at is not None and at > batch.cancel_at:
            at, outcome = batch.cancel_at + self._config.cancel_seconds, ResultType.CANCELED
        if at > batch.expires:
            at, outcome = batch.expires, ResultType.EXPIRED
        return at, outcome

    def end(self, batch: StoredBatch) -> float:
        return max(self.resolution(batch, r)[0] for r in batch.requests)

    def ended(self, batch: StoredBatch) -> bool:
        return self.now() >= self.end(batch)

    def view(self, batch: StoredBatch, base_url: str) -> dict[str, Any]:
        """The batch as the API shows it (a MessageBatch object)."""
        now, end = self.now(), self.end(batch)
        ended = now >= end
        counts = dict.fromkeys(COUNT_NAMES, 0)
        for request in batch.requests:
            at, outcome = self.resolution(batch, request)
            shown = ended or (self._config.progressive_counts and now >= at)
            counts[outcome.value if shown else "processing"] += 1
        status = "ended" if ended else "canceling" if batch.cancel_at is not None else "in_progress"
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": counts,
            "created_at": self.wall(batch.created),
            "expires_at": self.wall(batch.expires),
            "ended_at": self.wall(end) if ended else None,
            "cancel_initiated_at": self.wall(batch.cancel_at) if batch.cancel_at is not None else None,
            "archived_at": None,
            "results_url": f"{base_url}/v1/messages/batches/{batch.id}/results" if ended else None,
        }

    def succeeded(self) -> dict[str, int]:
        """How many succeeded answers each custom_id got in batches that ended (each one is paid)."""
        counts: dict[str, int] = {}
        for batch in self.newest_first():
            for request in batch.requests:
                at, outcome = self.resolution(batch, request)
                if outcome is ResultType.SUCCEEDED and not request.problem and self.now() >= at:
                    counts[request.custom_id] = counts.get(request.custom_id, 0) + 1
        return counts

    def result_lines(self, batch: StoredBatch) -> list[bytes]:
        """The results file of an ended batch: one JSON line per request (some twice), shuffled."""
        lines = []
        for request in batch.requests:
            line = self._result_line(batch, request)
            encoded = (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
            lines.extend([encoded] * (2 if request.plan.duplicate else 1))
        self._faults.rng().shuffle(lines)
        return lines

    def _result_line(self, batch: StoredBatch, request: StoredRequest) -> dict[str, Any]:
        with batch.lock:
            if request.line is not None:
                return request.line
        outcome = self.resolution(batch, request)[1]
        line = {"custom_id": request.custom_id, "result": self._result(request, outcome)}
        with batch.lock:
            if request.line is None:
                request.line = line
            return request.line

    def _result(self, request: StoredRequest, outcome: ResultType) -> dict[str, Any]:
        if outcome is ResultType.SUCCEEDED and request.problem:
            return _errored("invalid_request_error", request.problem)
        if outcome is ResultType.SUCCEEDED:
            return self._succeeded(request)
        if outcome is ResultType.ERRORED:
            return _errored(request.plan.error_type or "api_error", None)
        return {"type": outcome.value}

    def _succeeded(self, request: StoredRequest) -> dict[str, Any]:
        try:
            answer = doubt(self._responder()(request.params), request.custom_id, self._faults.faults)
        except Exception:  # a responder bug shows as the API's own internal error
            return _errored("api_error", None)
        if request.plan.malformed is not None:
            answer = spoil(answer, request.plan.malformed, self._faults.rng())
        answer, stop = cut_at_max_tokens(answer, request.params)
        usage = wire.usage_body(request.input_tokens, estimate_output_tokens(answer), "batch")
        message = wire.message_body(request.params["model"], answer, usage, stop)
        return {"type": "succeeded", "message": message}

    def _responder(self) -> Responder:
        return self._config.responder or rules_responder


def _errored(kind: str, message: str | None) -> dict[str, Any]:
    return {"type": "errored", "error": wire.error_body(kind, message, wire.new_id("req"))}
