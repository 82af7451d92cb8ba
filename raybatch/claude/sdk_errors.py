"""The one place where the anthropic SDK's exceptions become ``raybatch.errors``.

    429 spend limit (error.details.error_code), 402, 400 "usage limits"/"credit" → SpendLimitReached
    429 → RateLimited (retry_after from retry-after-ms / retry-after)    529 → Overloaded
    5xx, 408, 409, x-should-retry: true, connection drops, timeouts, a cut stream → UpstreamUnavailable
    401, 403 → AuthenticationFailed    404 → ResourceNotFound    other 4xx → InvalidRequest

Messages carry the status, the API's error type and request id, never keys or request content.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import anthropic
import httpx2  # the SDK's HTTP library: a results stream cut mid-way surfaces as its TransportError

from raybatch.errors import (
    AuthenticationFailed,
    InvalidRequest,
    Overloaded,
    RateLimited,
    RaybatchError,
    ResourceNotFound,
    SpendLimitReached,
    UpstreamUnavailable,
)

SPEND_LIMIT_CODES = frozenset(
    {
        "enforced_spend_limit_reached",
        "contract_spend_limit_reached",
        "linked_organization_spend_limit_reached",
        "linked_organization_billing_unavailable",
    }
)
# A spend limit the user set, and a low prepaid balance, come as 400 invalid_request_error with no
# error code; only the wording tells them apart from a bad request.
_SPEND_LIMIT_WORDING = ("reached your specified", "api usage limits", "credit balance is too low")
_API_MESSAGE_CHARS = 200


@contextmanager
def sdk_errors(what: str) -> Iterator[None]:
    """Translate any SDK or transport exception raised inside into the raybatch error tree."""
    try:
        yield
    except anthropic.APIStatusError as exc:
        raise from_status(exc, what) from exc
    except anthropic.APIConnectionError as exc:  # timeouts included
        raise UpstreamUnavailable(f"{what}: {type(exc).__name__}") from exc
    except anthropic.APIResponseValidationError as exc:
        raise UpstreamUnavailable(f"{what}: the API's response did not match its schema") from exc
    except httpx2.TransportError as exc:
        raise UpstreamUnavailable(f"{what}: connection failed while reading ({type(exc).__name__})") from exc


def from_status(exc: anthropic.APIStatusError, what: str) -> RaybatchError:
    """The raybatch error for one HTTP error response."""
    status = exc.status_code
    detail = f"{what}: HTTP {status} {exc.type or 'error'}: {_api_message(exc)} (request {exc.request_id})"
    retry_after = retry_after_seconds(exc.response.headers)
    if is_spend_limit(exc):
        return SpendLimitReached(detail)
    if status == 429:
        return RateLimited(detail, retry_after=retry_after)
    if status == 529:
        return Overloaded(detail, retry_after=retry_after)
    if status >= 500 or status in (408, 409) or exc.response.headers.get("x-should-retry") == "true":
        return UpstreamUnavailable(detail, retry_after=retry_after)
    if status in (401, 403):
        return AuthenticationFailed(detail)
    if status == 404:
        return ResourceNotFound(detail)
    return InvalidRequest(detail)


def is_spend_limit(exc: anthropic.APIStatusError) -> bool:
    """True when the error says the account's spend limit or credit is exhausted."""
    if exc.error_code in SPEND_LIMIT_CODES or exc.status_code == 402:
        return True
    message = (exc.api_message or "").lower()
    return exc.status_code == 400 and any(words in message for words in _SPEND_LIMIT_WORDING)


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds the API asks to wait: ``retry-after-ms``, else ``retry-after`` (seconds or a date)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            return max(0.0, float(raw) * scale)
        except ValueError:
            parsed = email.utils.parsedate_tz(raw)
            if parsed is not None:
                return max(0.0, email.utils.mktime_tz(parsed) - time.time())
    return None


def api_error_type(exc: BaseException) -> str:
    """The API's error type name for a raybatch error, as an errored result carries it."""
    if isinstance(exc, RateLimited):
        return "rate_limit_error"
    if isinstance(exc, Overloaded):
        return "overloaded_error"
    if isinstance(exc, InvalidRequest):
        return "invalid_request_error"
    if isinstance(exc, AuthenticationFailed):
        return "authentication_error"
    return "api_error"


def _api_message(exc: anthropic.APIStatusError) -> str:
    message = " ".join((exc.api_message or "").split())
    return message[:_API_MESSAGE_CHARS]
