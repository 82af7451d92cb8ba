"""Pack prepared requests into Message Batches that stay under the byte and request limits.

A batch body is ``{"requests":[r1,r2,...]}``: ``ENVELOPE_BYTES`` plus each request's encoded size plus
one comma between requests. Requests are grouped by job (jobs in order of first appearance, each
job's chunks in their given order) and then filled next-fit: a batch closes when the next request
does not fit. So a job that fits in one batch spans at most two, and the count is bounded:

    every closed batch is either full by count (``max_requests`` requests) or has more than
    ``C - w_max`` bytes of requests, where w = encoded size + 1 (its comma), C = max_bytes -
    ENVELOPE_BYTES + 1, and w_max the largest w.  Hence, with W = Σw and n requests,

        batches ≤ ⌊n / max_requests⌋ + ⌊W / (C - w_max + 1)⌋ + 1,

    and when the byte limit alone closes batches and (batches - 1) · w_max ≤ C (e.g. up to ~66
    batches of 3 MB requests at 200 MB), batches ≤ ⌈W / C⌉ + 1.
"""

from __future__ import annotations

from collections.abc import Iterable

from raybatch.claude.records import PreparedRequest
from raybatch.errors import ConfigError, InvalidRequest
from raybatch.settings import ANTHROPIC_BATCH_MAX_MB, ANTHROPIC_BATCH_MAX_REQUESTS
from raybatch.units import MB

ENVELOPE_BYTES = len('{"requests":[]}')
# "256 MB" read as decimal megabytes, the stricter reading; settings' MB are converted the same way
ANTHROPIC_MAX_BATCH_BYTES = ANTHROPIC_BATCH_MAX_MB * MB


def megabytes(mb: float) -> int:
    """A limit given in MB (settings' ``batch_max_mb``) in bytes, as the packer counts them."""
    return int(mb * MB)


def batch_body_size(requests: Iterable[PreparedRequest]) -> int:
    """Exact bytes of the create body holding ``requests``."""
    sizes = [request.encoded_size for request in requests]
    return ENVELOPE_BYTES + sum(sizes) + max(len(sizes) - 1, 0)


def pack(
    requests: Iterable[PreparedRequest], *, max_bytes: int, max_requests: int
) -> list[list[PreparedRequest]]:
    """Batches of ≤ ``max_bytes`` encoded and ≤ ``max_requests`` requests, each request in exactly one."""
    _check_limits(max_bytes, max_requests)
    batches: list[list[PreparedRequest]] = []
    current: list[PreparedRequest] = []
    size = ENVELOPE_BYTES
    for request in _by_job(requests):
        added = request.encoded_size + (1 if current else 0)
        if ENVELOPE_BYTES + request.encoded_size > max_bytes:
            raise InvalidRequest(
                f"request {request.custom_id} is {request.encoded_size} bytes: "
                f"no batch of at most {max_bytes} bytes can hold it"
            )
        if current and (size + added > max_bytes or len(current) == max_requests):
            batches.append(current)
            current, size, added = [], ENVELOPE_BYTES, request.encoded_size
        current.append(request)
        size += added
    if current:
        batches.append(current)
    return batches


def _by_job(requests: Iterable[PreparedRequest]) -> list[PreparedRequest]:
    """Requests grouped by job, jobs in order of first appearance; refuses a repeated custom_id."""
    jobs: dict[int, list[PreparedRequest]] = {}
    seen: set[str] = set()
    for request in requests:
        if request.custom_id in seen:
            raise InvalidRequest(f"custom_id {request.custom_id} appears twice in one packing")
        seen.add(request.custom_id)
        jobs.setdefault(request.job_id, []).append(request)
    return [request for chunk_list in jobs.values() for request in chunk_list]


def _check_limits(max_bytes: int, max_requests: int) -> None:
    if not ENVELOPE_BYTES < max_bytes <= ANTHROPIC_MAX_BATCH_BYTES:
        raise ConfigError(
            f"batch byte limit {max_bytes} must be above {ENVELOPE_BYTES} and at most "
            f"{ANTHROPIC_MAX_BATCH_BYTES} (Anthropic's {ANTHROPIC_BATCH_MAX_MB} MB)"
        )
    if not 1 <= max_requests <= ANTHROPIC_BATCH_MAX_REQUESTS:
        raise ConfigError(f"batch request limit {max_requests} must be 1..{ANTHROPIC_BATCH_MAX_REQUESTS}")
