"""Turns the live ``Faults`` knobs into decisions: which response fails, which result is spoiled.

Counters (``*_times``) count down under one lock, so parallel requests never fire a fault twice;
fractions draw from one random stream seeded by ``Faults.seed`` (re-seeded when the seed changes).
"""

from __future__ import annotations

import math
import random
import threading
from dataclasses import dataclass
from typing import Any

from raybatch.claude.emulator import wire
from raybatch.claude.emulator.config import EmulatorConfig, Faults, MalformedKind, SpendLimitKind
from raybatch.models import ResultType

_BILLED_ENDPOINTS = frozenset({"messages", "create"})


@dataclass(frozen=True)
class HttpFault:
    """An error response to send instead of the real one."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str]


@dataclass(frozen=True)
class RequestPlan:
    """What one batch request will end as, decided when the batch is created."""

    outcome: ResultType
    error_type: str | None = None
    malformed: MalformedKind | None = None
    duplicate: bool = False


class FaultInjector:
    """Draws fault decisions from the config's live ``Faults``."""

    def __init__(self, config: EmulatorConfig) -> None:
        self._config = config
        self._lock = threading.Lock()
        self._seed = config.faults.seed
        self._rng = random.Random(self._seed)

    @property
    def faults(self) -> Faults:
        return self._config.faults

    def take(self, counter: str) -> bool:
        """True (and one fewer left) when the ``counter`` knob has shots left."""
        with self._lock:
            left = getattr(self.faults, counter)
            if left and left > 0:
                setattr(self.faults, counter, left - 1)
                return True
            return False

    def draw(self, fraction: float) -> bool:
        """True with probability ``fraction``."""
        if fraction <= 0:
            return False
        with self._lock:
            return self._random().random() < fraction

    def rng(self) -> random.Random:
        """A child random stream, for work done outside the lock (e.g. shuffling results)."""
        with self._lock:
            return random.Random(self._random().getrandbits(64))

    def http_fault(self, endpoint: str, request_id: str) -> HttpFault | None:
        """The error to answer ``endpoint`` with now, if any."""
        faults = self.faults
        if faults.spend_limit and endpoint in _BILLED_ENDPOINTS:
            return _spend_limit(faults.spend_limit_kind, request_id)
        if faults.endpoints is not None and endpoint not in faults.endpoints:
            return None
        if self.take("rate_limit_times") or self.draw(faults.rate_limit_fraction):
            body = wire.error_body("rate_limit_error", None, request_id)
            return HttpFault(429, body, _retry_after_headers(faults.retry_after))
        if self.take("overloaded_times") or self.draw(faults.overloaded_fraction):
            return HttpFault(529, wire.error_body("overloaded_error", None, request_id), {})
        if self.take("server_error_times") or self.draw(faults.server_error_fraction):
            return HttpFault(500, wire.error_body("api_error", None, request_id), {})
        return None

    def plan(self, custom_id: str) -> RequestPlan:
        """The planned outcome of one batch request."""
        faults = self.faults
        spoiled = self._hit(custom_id, faults.malformed_ids, faults.malformed_fraction)
        malformed = faults.malformed_kind if spoiled else None
        duplicate = self.draw(faults.duplicate_fraction)
        if self._hit(custom_id, faults.errored_ids, faults.errored_fraction):
            return RequestPlan(ResultType.ERRORED, faults.errored_type, duplicate=duplicate)
        if self._hit(custom_id, faults.expired_ids, faults.expired_fraction):
            return RequestPlan(ResultType.EXPIRED, duplicate=duplicate)
        if self._hit(custom_id, faults.canceled_ids, faults.canceled_fraction):
            return RequestPlan(ResultType.CANCELED, duplicate=duplicate)
        return RequestPlan(ResultType.SUCCEEDED, malformed=malformed, duplicate=duplicate)

    def malformed_message(self) -> MalformedKind | None:
        """How to spoil a synchronous Messages answer, if at all."""
        return self.faults.malformed_kind if self.draw(self.faults.malformed_fraction) else None

    def cut_results(self) -> int | None:
        """Lines after which to cut this results stream, or None to send it whole."""
        cut = self.faults.cut_results_after
        if cut is None or not self.take("cut_results_times"):
            return None
        return cut

    def _hit(self, custom_id: str, ids: frozenset[str], fraction: float) -> bool:
        return custom_id in ids or self.draw(fraction)

    def _random(self) -> random.Random:
        if self.faults.seed != self._seed:
            self._seed = self.faults.seed
            self._rng = random.Random(self._seed)
        return self._rng


def _retry_after_headers(seconds: float) -> dict[str, str]:
    headers = {"retry-after": str(max(0, math.ceil(seconds)))}
    if seconds != int(seconds):
        headers["retry-after-ms"] = str(round(seconds * 1000))
    return headers


def _spend_limit(kind: SpendLimitKind, request_id: str) -> HttpFault:
    kind = SpendLimitKind(kind)  # a knob set at runtime may be a plain string
    message = wire.SPEND_LIMIT_MESSAGES[kind.value]
    if kind is SpendLimitKind.ENFORCED:
        # No retry-after: retrying does not help until the month turns or the tier changes.
        code = "enforced_spend_limit_reached"
        body = wire.error_body("rate_limit_error", message, request_id, error_code=code)
        return HttpFault(429, body, {})
    return HttpFault(400, wire.error_body("invalid_request_error", message, request_id), {})
