"""An answer cut at ``max_tokens`` is never filed as complete: it is asked again with a larger budget.

The filer retries such a result as ``MaxTokens`` (within the chunk's tries, ``MAX_ATTEMPTS``); the
next send of that chunk doubles ``max_tokens`` for each try so far, up to ``MAX_TOKENS_LIMIT``. When
the tries run out the chunk fails, and its job fails with that reason.
"""

from __future__ import annotations

from raybatch.claude.records import PreparedRequest
from raybatch.models import ChunkRecord
from raybatch.steps.build_requests import with_params

MAX_TOKENS_ERROR = "MaxTokens"


CUT_SHORT = "the answer stopped at max_tokens: not filed as complete"  # the chunk's (and job's) reason


def with_answer_budget(request: PreparedRequest, chunk: ChunkRecord | None, limit: int) -> PreparedRequest:
    """``request`` as it is sent again: a larger ``max_tokens`` when its last answer was cut short."""
    if chunk is None or chunk.error_class != MAX_TOKENS_ERROR:
        return request
    params = request.params
    base = int(params["max_tokens"])
    budget = max(base, min(limit, base * 2 ** max(1, chunk.attempts)))
    return with_params(request, {**params, "max_tokens": budget})
