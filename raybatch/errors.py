"""The one error tree. "Retry?" is ``isinstance(err, TransientError)``.

    RaybatchError
    ├── TransientError             retried with backoff and jitter, within a finite budget
    │   ├── RateLimited            429; carries retry_after
    │   ├── Overloaded             529
    │   ├── UpstreamUnavailable    5xx, connection resets, transient 404 after create
    │   │   └── OutagePastBudget   the API stayed down past OUTAGE_BUDGET: the work is parked
    │   ├── StorageUnavailable     object store hiccups
    │   ├── DatabaseUnavailable    state DB hiccups
    │   └── WaitTimedOut           a wait passed its deadline (the work may still finish)
    ├── PermanentError             fails the job it belongs to, with a reason; never retried
    │   ├── ConfigError            bad settings or arguments
    │   ├── InvalidSource          encrypted, corrupt, empty or oversized input file
    │   ├── InvalidRequest         a request the API rejects (400, 413)
    │   │   └── ResourceNotFound   404; a batch just created may not be visible yet
    │   ├── AuthenticationFailed   401/403
    │   ├── UnparseableAnswer      an answer that is not valid even after repair
    │   ├── BatchFailed            a batch that ended without usable results
    │   ├── AttemptsExhausted      transient failures past the retry budget
    │   ├── TimeLimitExceeded      a task ran past its time limit on every try (names the limit)
    │   ├── IntentConflict         a request already held by another batch intent or batch
    │   ├── LeaseLost              a stale owner tried to complete work it no longer holds
    │   ├── ObjectNotFound         a key that is not in the store
    │   ├── InvalidObjectKey       a key, prefix or metadata entry refused before touching storage
    │   ├── StorageRejected        the object store refused for good (denied, no bucket, bad request)
    │   └── ReviewConflict         a correction made from a version that is no longer the current one
    └── SpendLimitReached          the account's spend limit: work is parked, not failed

Messages never carry secrets or page text. Foreign exceptions are translated once, at the port
that met them, with ``raise ... from exc``.

A job failed for a reason that may pass (an outage past its budget, a lost batch, expired requests,
rejected credentials) is taken up again by the next run of its source: ``retried_on_rerun``.
"""

from __future__ import annotations

from enum import StrEnum


class RaybatchError(Exception):
    """Base of every error raybatch raises on purpose."""


class TransientError(RaybatchError):
    """A failure that may succeed if tried again later."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RateLimited(TransientError):
    """HTTP 429: too many requests; honour ``retry_after``."""


class Overloaded(TransientError):
    """HTTP 529: the API is overloaded."""


class UpstreamUnavailable(TransientError):
    """A 5xx, a dropped connection, or a not-yet-visible resource."""


class OutagePastBudget(UpstreamUnavailable):
    """The API stayed unavailable for the whole budget; ``maybe_created``: a batch may exist."""

    def __init__(self, message: str, *, maybe_created: bool = False) -> None:
        super().__init__(message)
        self.maybe_created = maybe_created


class StorageUnavailable(TransientError):
    """The object store did not answer or answered with a server error."""


class DatabaseUnavailable(TransientError):
    """The state database did not answer or was locked for too long."""


class WaitTimedOut(TransientError):
    """A wait passed its deadline; the awaited work may still finish."""


class PermanentError(RaybatchError):
    """A failure that will not go away by retrying."""


class ConfigError(PermanentError):
    """Invalid settings or command-line arguments."""


class SourceProblem(StrEnum):
    """Why a source file cannot be used: an ``InvalidSource``'s ``reason``, first in its message."""

    ENCRYPTED = "encrypted"
    CORRUPT = "corrupt"
    EMPTY = "empty"
    OVERSIZED = "oversized"
    UNSUPPORTED = "unsupported"
    LINKED = "linked"  # a symbolic link (never followed)
    NOT_A_FILE = "not-a-file"
    UNREADABLE = "unreadable"
    CHANGED = "changed"  # no longer the bytes that were registered


class InvalidSource(PermanentError):
    """A source file that cannot be processed: encrypted, corrupt, empty, too large.

    With a ``reason`` the message reads ``<reason>: <detail>``."""

    def __init__(self, detail: str, *, reason: SourceProblem | None = None) -> None:
        super().__init__(f"{reason}: {detail}" if reason else detail)
        self.reason = reason


class InvalidRequest(PermanentError):
    """A request the API rejected as invalid."""


class ResourceNotFound(InvalidRequest):
    """HTTP 404: the API does not know the resource (a batch just created may not be visible yet)."""


class AuthenticationFailed(PermanentError):
    """The API rejected the credentials."""


class UnparseableAnswer(PermanentError):
    """Claude's answer does not validate, even after one repair."""


class BatchFailed(PermanentError):
    """A batch ended (or was lost) without usable results."""


class AttemptsExhausted(PermanentError):
    """A transient failure kept happening past the retry budget."""


class TimeLimitExceeded(PermanentError):
    """Work ran past its time limit (PREPARE_TIMEOUT, WRITE_TIMEOUT) on each of its tries."""


class IntentConflict(PermanentError):
    """A batch intent or attach refused: a request is held by another intent or batch already."""


class LeaseLost(PermanentError):
    """The caller's lease expired and was taken over; its completion is refused."""


class ObjectNotFound(PermanentError):
    """No object under that key."""


class InvalidObjectKey(PermanentError, ValueError):
    """An object key, prefix or metadata entry the store refuses before touching storage."""


class StorageRejected(PermanentError):
    """The object store refused a request for good: access denied, no such bucket, bad request."""


class ReviewConflict(PermanentError):
    """A correction made from a document version another correction has replaced: nothing changed."""


class SpendLimitReached(RaybatchError):
    """The account reached its spend limit: park the work until the limit is raised."""


def error_class(exc: BaseException) -> str:
    """The short class name stored in the errors table and shown to users."""
    return type(exc).__name__


# Failure classes (error_class values of jobs and chunks) a later run takes up again by itself:
# outages past their budget, lost or expired work, credentials fixed since. Everything else
# (invalid source or request, unparseable answer) stays failed until ``raybatch retry``.
_PASSING_RESULT_TYPES = frozenset(
    {"api_error", "overloaded_error", "rate_limit_error", "errored", "expired", "canceled", "missing"}
)
_PASSING_CLASSES = frozenset(
    {
        "AttemptsExhausted",
        "AuthenticationFailed",
        "BatchFailed",
        "SpendLimitReached",
        "LeaseLost",
        # a process or node of the cluster died under the work
        "WorkerCrashedError",
        "OutOfMemoryError",
        "NodeDiedError",
        "ObjectLostError",
        "OwnerDiedError",
        "ActorDiedError",
        "RayActorError",
    }
)


def _transient_names() -> frozenset[str]:
    found: set[str] = set()
    todo: list[type[BaseException]] = [TransientError]
    while todo:
        kind = todo.pop()
        found.add(kind.__name__)
        todo.extend(kind.__subclasses__())
    return frozenset(found)


def retried_on_rerun(failure_class: str | None) -> bool:
    """Whether a job failed with this class is taken up again by the next run without ``--force``."""
    if failure_class is None:
        return False
    return (
        failure_class in _PASSING_CLASSES
        or failure_class in _PASSING_RESULT_TYPES
        or failure_class in _transient_names()
    )
