"""Synchronous Messages calls for urgent work: bounded concurrency, retries that honour retry-after.

Each request comes back as a ``RequestResult`` shaped like a batch result, so the pipeline files both
the same way: a request the API rejects → errored ``invalid_request_error``; transient failures
(429, 529, 5xx, dropped connections) past the retry budget → errored with their API type.

Spend limit: once the API says the account's spend limit or credit is exhausted, no new request is
sent; requests already in flight finish; every request left unanswered is returned in ``parked``,
neither failed nor counted as an attempt. The caller keeps those chunks prepared and pauses until
the limit is raised. Bad credentials (401/403) stop the run: no new request is sent, the answers
already returned are kept (they are paid), and the outcome carries the AuthenticationFailed and
the requests left unanswered.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

import anthropic

from raybatch.claude.batch_client import SdkClientHolder, succeeded_result
from raybatch.claude.records import PreparedRequest, RequestResult
from raybatch.claude.sdk_errors import api_error_type, sdk_errors
from raybatch.errors import AttemptsExhausted, AuthenticationFailed, InvalidRequest, SpendLimitReached
from raybatch.models import ResultType
from raybatch.retry import Backoff, retry_call
from raybatch.settings import ClaudeSettings

log = logging.getLogger(__name__)

SYNC_BACKOFF = Backoff(initial=1.0, factor=2.0, cap=60.0, jitter=0.2)
_COUNTED = ("model", "system", "messages", "output_config")  # what count_tokens takes of a request


@dataclass(frozen=True)
class SyncOutcome:
    """What a run of synchronous calls gave: results to file, and custom_ids parked by a spend limit."""

    results: list[RequestResult]
    parked: list[str]
    refused: list[str] = field(default_factory=list)  # unanswered: the credentials were rejected
    rejected: AuthenticationFailed | None = None  # why, when they were

    @property
    def spend_limited(self) -> bool:
        return bool(self.parked)


class AnthropicMessageClient(SdkClientHolder):
    """Prepared requests through ``messages.create``, at most ``sync_concurrency`` at a time across
    every ``send`` of this client."""

    def __init__(
        self,
        settings: ClaudeSettings,
        *,
        client: anthropic.Anthropic | None = None,
        attempts: int = 5,
        backoff: Backoff = SYNC_BACKOFF,
        sleep: Callable[[float], None] = time.sleep,
        timeout: float = 600.0,
    ) -> None:
        # The SDK's own retries are off: ours honour retry-after through an injectable sleep.
        super().__init__(settings, client, max_retries=0, timeout=timeout)
        self._concurrency = settings.sync_concurrency
        # One bound for the client, however many ``send`` run at once (one per urgent offer).
        self._slots = threading.BoundedSemaphore(settings.sync_concurrency)
        self._attempts = attempts
        self._backoff = backoff
        self._sleep = sleep

    def send(
        self, requests: Sequence[PreparedRequest], *, on_result: Callable[[RequestResult], None] | None = None
    ) -> SyncOutcome:
        """Send every request; ``on_result`` sees each result as it arrives (e.g. to file it at once)."""
        stop = threading.Event()
        results: list[RequestResult] = []
        unanswered: list[str] = []
        rejected: AuthenticationFailed | None = None
        with ThreadPoolExecutor(max_workers=self._concurrency, thread_name_prefix="claude-sync") as pool:
            futures = {pool.submit(self._send_unless_stopped, r, stop): r for r in requests}
            for future in as_completed(futures):
                try:
                    result = future.result()
                except AuthenticationFailed as exc:  # ``stop`` is set; the answers so far are kept
                    rejected, result = rejected or exc, None
                if result is None:
                    unanswered.append(futures[future].custom_id)
                    continue
                results.append(result)
                if on_result is not None:
                    on_result(result)
        if rejected is not None:
            return SyncOutcome(results, [], unanswered, rejected)
        if unanswered:
            log.warning("spend limit reached: %d requests parked", len(unanswered))
        return SyncOutcome(results, unanswered)

    def send_one(self, request: PreparedRequest) -> RequestResult:
        """One request, retried; raises SpendLimitReached or AuthenticationFailed, else a result."""
        try:
            message = retry_call(
                lambda: self._create(request),
                attempts=self._attempts,
                backoff=self._backoff,
                sleep=self._sleep,
                what=f"messages {request.custom_id}",
            )
        except InvalidRequest as exc:
            return _errored(request, "invalid_request_error", str(exc))
        except AttemptsExhausted as exc:
            cause = exc.__cause__ or exc
            return _errored(request, api_error_type(cause), str(cause))
        return succeeded_result(request.custom_id, message)

    def _send_unless_stopped(self, request: PreparedRequest, stop: threading.Event) -> RequestResult | None:
        with self._slots:
            if stop.is_set():
                return None
            return self._send_or_stop(request, stop)

    def _send_or_stop(self, request: PreparedRequest, stop: threading.Event) -> RequestResult | None:
        try:
            return self.send_one(request)
        except SpendLimitReached:
            stop.set()
            return None
        except AuthenticationFailed:
            stop.set()
            raise

    def count_tokens(self, request: PreparedRequest) -> int:
        """The request's input tokens by ``POST /v1/messages/count_tokens`` (nothing is sent to the
        model, nothing is billed); retried like a message."""
        params = {k: v for k, v in request.params.items() if k in _COUNTED}

        def count() -> int:
            with sdk_errors(f"count_tokens {request.custom_id}"):
                return int(self._client.messages.count_tokens(**params).input_tokens)

        what = f"count_tokens {request.custom_id}"
        return retry_call(count, attempts=self._attempts, backoff=self._backoff, sleep=self._sleep, what=what)

    def _create(self, request: PreparedRequest) -> Any:
        with sdk_errors(f"messages {request.custom_id}"):
            # The header names the chunk in our own logs and the emulator's answer counts.
            headers = {"x-raybatch-custom-id": request.custom_id}
            return self._client.messages.create(**request.params, extra_headers=headers)


def _errored(request: PreparedRequest, error_type: str, message: str) -> RequestResult:
    return RequestResult(request.custom_id, ResultType.ERRORED, error_type=error_type, error_message=message)
