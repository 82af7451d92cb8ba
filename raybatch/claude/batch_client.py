"""Message Batches through the real anthropic SDK, normalised into ``BatchState`` and ``RequestResult``.

Create is never retried blindly: the SDK's own retries are off for it, and ``create_reconciled``
retries by itself within a time budget, first looking for the batch a lost response may already
have made.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Generator, Iterator, Sequence, Set
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Self

import anthropic
from anthropic.types.messages import MessageBatch

from raybatch.claude.records import BatchState, PreparedRequest, RequestResult
from raybatch.claude.sdk_errors import sdk_errors
from raybatch.errors import (
    ConfigError,
    InvalidRequest,
    OutagePastBudget,
    Overloaded,
    RateLimited,
    TransientError,
    UpstreamUnavailable,
)
from raybatch.models import BatchStatus, ResultType, Usage
from raybatch.retry import Backoff, retrying
from raybatch.settings import ClaudeSettings
from raybatch.steps.build_requests import batch_entry

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.anthropic.com"
EMULATOR_API_KEY = "raybatch-emulator"  # sent when a base_url is set without a key (the emulator)
BATCHES_PATH = "/v1/messages/batches"  # the SDK's ``messages.batches.create``, posted as bytes
CREATE_BACKOFF = Backoff(initial=2.0, factor=2.0, cap=60.0, jitter=0.1)
CLOCK_SKEW = timedelta(minutes=5)  # the API's clock against ours, when matching a lost create
_API_STATUSES = {
    "in_progress": BatchStatus.IN_PROGRESS,
    "canceling": BatchStatus.CANCELING,
    "ended": BatchStatus.ENDED,
}


def make_sdk_client(
    settings: ClaudeSettings, *, max_retries: int = 2, timeout: float = 120.0
) -> anthropic.Anthropic:
    """An SDK client from the settings alone (the SDK is not left to read the environment for them)."""
    key = settings.anthropic_api_key
    if key is None and settings.anthropic_base_url is None:
        raise ConfigError("ANTHROPIC_API_KEY is not set (or point ANTHROPIC_BASE_URL at the emulator)")
    return anthropic.Anthropic(
        api_key=key.get_secret_value() if key is not None else EMULATOR_API_KEY,
        base_url=settings.anthropic_base_url or DEFAULT_BASE_URL,
        max_retries=max_retries,
        timeout=timeout,
    )


def batch_body(requests: Sequence[PreparedRequest]) -> bytes:
    """A batch create body of the requests as they were encoded where they were built (compact,
    UTF-8, as ``encoded_size`` counts them). ``messages.batches.create`` would first walk and copy
    every request, then encode it: a third of the coordinator's CPU on small jobs."""
    entries = ",".join(batch_entry(r.custom_id, r.params_json) for r in requests)
    return f'{{"requests":[{entries}]}}'.encode()


class SdkClientHolder:
    """Holds an SDK client given to it, or one it makes from the settings and closes when done."""

    def __init__(
        self,
        settings: ClaudeSettings,
        client: anthropic.Anthropic | None,
        *,
        max_retries: int,
        timeout: float,
    ) -> None:
        self._owns_client = client is None
        self._client = client or make_sdk_client(settings, max_retries=max_retries, timeout=timeout)

    def close(self) -> None:
        """Close the SDK client's connections (when this object made it)."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AnthropicBatchClient(SdkClientHolder):
    """Create, retrieve, list, cancel and read Message Batches."""

    def __init__(
        self,
        settings: ClaudeSettings,
        *,
        client: anthropic.Anthropic | None = None,
        max_retries: int = 2,
        timeout: float = 120.0,
    ) -> None:
        super().__init__(settings, client, max_retries=max_retries, timeout=timeout)

    def create(self, requests: Sequence[PreparedRequest]) -> BatchState:
        """Create one batch; one HTTP call, never retried here (see ``create_reconciled``)."""
        if not requests:
            raise InvalidRequest("a batch needs at least one request")
        client = self._client.with_options(max_retries=0)
        with sdk_errors("create batch"):
            batch = client.post(BATCHES_PATH, content=batch_body(requests), cast_to=MessageBatch)
        return to_batch_state(batch)

    def create_reconciled(
        self,
        requests: Sequence[PreparedRequest],
        *,
        created_after: datetime,
        known_ids: Set[str] | Callable[[], Set[str]],
        budget: float = 60.0,
        backoff: Backoff = CREATE_BACKOFF,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        on_adopt: Callable[[BatchState], None] | None = None,
    ) -> BatchState:
        """Create a batch exactly once, waiting out transient failures for ``budget`` seconds.

        After a failure that may hide a created batch (a lost response, a 5xx), it first lists the
        batches created since ``created_after`` (the intent's time, recorded before calling) and adopts
        the newest one with as many requests that is not in ``known_ids``, instead of creating again.
        ``known_ids`` may be a function, read again at each look (batches another process recorded
        meanwhile are not ours); ``on_adopt`` is told of a batch adopted rather than created.
        Past the budget it raises ``OutagePastBudget`` (transient): the caller parks the work and keeps the
        intent, to be reconciled later, when a batch may have been made.
        """
        maybe_created = False
        attempt = 0
        known = known_ids if callable(known_ids) else lambda: known_ids

        def adopt(found: BatchState | None) -> BatchState | None:
            if found is not None and on_adopt is not None:
                on_adopt(found)
            return found

        def once() -> BatchState:
            nonlocal maybe_created, attempt
            attempt += 1
            try:
                if maybe_created:
                    adopted = adopt(self.find_created(len(requests), created_after, known()))
                    if adopted is not None:
                        return adopted
                    maybe_created = False
                return self.create(requests)
            except TransientError as exc:
                log.warning("create batch: attempt %d failed: %s", attempt, exc)
                maybe_created = maybe_created or _may_have_created(exc)
                raise

        try:
            return retrying(once, backoff=backoff, budget=budget, sleep=sleep, monotonic=monotonic)
        except TransientError as exc:
            adopted = adopt(self._last_look(len(requests), created_after, known, maybe_created))
            if adopted is not None:
                return adopted
            raise OutagePastBudget(
                f"create batch: the API failed for {budget:.0f} s ({attempt} tries): {exc}",
                maybe_created=maybe_created,
            ) from exc

    def _last_look(
        self, count: int, created_after: datetime, known: Callable[[], Set[str]], maybe_created: bool
    ) -> BatchState | None:
        if not maybe_created:
            return None
        try:
            return self.find_created(count, created_after, known())
        except TransientError:
            return None

    def find_created(self, count: int, created_after: datetime, known_ids: Set[str]) -> BatchState | None:
        """The newest batch created since ``created_after`` with ``count`` requests, not in ``known_ids``."""
        since = _aware(created_after) - CLOCK_SKEW
        for state in self.list(created_after=since):
            if state.id not in known_ids and state.total == count:
                log.info("create batch: adopted %s, made by an earlier attempt", state.id)
                return state
        return None

    def retrieve(self, batch_id: str) -> BatchState:
        """The batch's current state."""
        with sdk_errors("retrieve batch"):
            return to_batch_state(self._client.messages.batches.retrieve(batch_id))

    def list(self, *, created_after: datetime | None = None, page_size: int = 100) -> Iterator[BatchState]:
        """Batches, newest first, page by page; stops at the first one created before ``created_after``."""
        since = _aware(created_after) if created_after is not None else None
        with sdk_errors("list batches"):
            for batch in self._client.messages.batches.list(limit=page_size):
                state = to_batch_state(batch)
                if since is not None and state.created_at is not None and state.created_at < since:
                    return
                yield state

    def cancel(self, batch_id: str) -> BatchState:
        """Ask the API to cancel the batch; it moves to canceling, then ends."""
        with sdk_errors("cancel batch"):
            return to_batch_state(self._client.messages.batches.cancel(batch_id))

    def delete(self, batch_id: str) -> None:
        """Delete an ended batch and its results."""
        with sdk_errors("delete batch"):
            self._client.messages.batches.delete(batch_id)

    @contextmanager
    def results(self, batch_id: str) -> Iterator[ResultStream]:
        """The results of an ended batch, streamed; the stream is closed however the block ends.

        A stream cut mid-way raises UpstreamUnavailable from the iterator; results already taken stay
        valid, and reading again gives every result (callers drop the ones they have by custom_id).
        """
        with sdk_errors("open batch results"):
            try:
                decoder = self._client.messages.batches.results(batch_id)
            except anthropic.APIError:
                raise
            except anthropic.AnthropicError as exc:  # no results_url: the batch has not ended
                raise InvalidRequest(f"batch {batch_id} has no results yet") from exc
        stream = ResultStream(decoder)
        try:
            yield stream
        finally:
            stream.close()


class ResultStream(Iterator[RequestResult]):
    """One batch's results as they arrive over HTTP; ``close`` ends the stream."""

    def __init__(self, decoder: Any) -> None:
        self._decoder = decoder
        self._results = _read_results(decoder)

    def __next__(self) -> RequestResult:
        return next(self._results)

    def close(self) -> None:
        self._results.close()
        self._decoder.close()

    @property
    def closed(self) -> bool:
        return bool(self._decoder.http_response.is_closed)


def to_batch_state(batch: Any) -> BatchState:
    """Our view of an SDK MessageBatch; an unknown processing_status becomes UNKNOWN."""
    raw = batch.to_dict(mode="json", warnings=False)
    counts = raw.get("request_counts") or {}
    return BatchState(
        id=batch.id,
        status=_API_STATUSES.get(str(getattr(batch, "processing_status", "")), BatchStatus.UNKNOWN),
        counts={name: int(value) for name, value in counts.items() if isinstance(value, int)},
        created_at=_as_datetime(batch, "created_at"),
        ended_at=_as_datetime(batch, "ended_at"),
        results_url=getattr(batch, "results_url", None),
        raw=raw,
    )


def to_request_result(line: Any) -> RequestResult:
    """Our view of one results line (an SDK MessageBatchIndividualResponse)."""
    result = line.result
    kind = getattr(result, "type", None)
    if kind == "succeeded":
        return succeeded_result(line.custom_id, result.message)
    if kind == "errored":
        error = getattr(getattr(result, "error", None), "error", None)
        return RequestResult(
            line.custom_id,
            ResultType.ERRORED,
            error_type=getattr(error, "type", None) or "api_error",
            error_message=getattr(error, "message", None),
        )
    if kind in (ResultType.EXPIRED, ResultType.CANCELED):
        return RequestResult(line.custom_id, ResultType(kind))
    unknown = f"unknown result type {kind!r}"
    return RequestResult(line.custom_id, ResultType.ERRORED, error_type="api_error", error_message=unknown)


def succeeded_result(custom_id: str, message: Any) -> RequestResult:
    """A succeeded result from an SDK Message: its text blocks joined, and its usage."""
    text = "".join(block.text for block in message.content if getattr(block, "type", None) == "text")
    stop = getattr(message, "stop_reason", None)
    return RequestResult(
        custom_id, ResultType.SUCCEEDED, text=text, usage=usage_of(message.usage), stop_reason=stop
    )


def usage_of(usage: Any) -> Usage:
    """Token usage of one SDK Message."""
    return Usage(
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
        cache_creation_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
    )


def _read_results(decoder: Any) -> Generator[RequestResult, None, None]:
    with sdk_errors("read batch results"):
        try:
            for line in decoder:
                yield to_request_result(line)
        except json.JSONDecodeError as exc:
            raise UpstreamUnavailable("read batch results: a results line was cut short") from exc


def _may_have_created(exc: TransientError) -> bool:
    # A 429 or 529 is a refusal before any work; anything else may have lost a created batch's reply.
    return not isinstance(exc, RateLimited | Overloaded)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _as_datetime(batch: Any, name: str) -> datetime | None:
    value = getattr(batch, name, None)
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return _aware(value) if isinstance(value, datetime) else None
