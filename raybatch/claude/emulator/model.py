"""The emulator's stand-in for Claude: the default rule-based responder, param checks, spoiled answers."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from raybatch.claude.emulator.config import MalformedKind
from raybatch.claude.pagetext import pages_from_params

_SPOILERS = [kind for kind in MalformedKind if kind is not MalformedKind.MIXED]


def rules_responder(params: Mapping[str, Any]) -> str:
    """The default model: reads each page's text from the request and answers by simple rules
    (the sample corpus's, for the default classes file; a file's hints and labels for any other)."""
    from raybatch.claude.emulator.file_rules import answer_by_file, from_another_file
    from raybatch.claude.emulator.rules import answer_chunk  # late: tests may swap the rules

    pages = pages_from_params(params)
    if from_another_file(params):
        return answer_by_file(params, pages).model_dump_json(exclude={"repairs"})
    return answer_chunk(pages).model_dump_json()


def cut_at_max_tokens(answer: str, params: Mapping[str, Any]) -> tuple[str, str]:
    """The answer and its stop reason: cut at ``max_tokens`` (as the emulator counts tokens) when
    it is longer, as the API stops a model that runs out of its budget."""
    from raybatch.claude.emulator.tokens import estimate_output_tokens

    limit = int(params.get("max_tokens") or 0)
    if estimate_output_tokens(answer) <= limit:
        return answer, "end_turn"
    return answer[: limit * 4], "max_tokens"


def check_params(params: Any) -> str | None:
    """Why the API would reject these Messages params, or None when they look acceptable."""
    if not isinstance(params, Mapping):
        return "params: Input should be an object"
    if not isinstance(params.get("model"), str) or not params["model"]:
        return "model: Field required"
    max_tokens = params.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return "max_tokens: Field required and must be at least 1"
    messages = params.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if any(not isinstance(m, Mapping) or m.get("role") not in {"user", "assistant"} for m in messages):
        return "messages: each message needs a role of user or assistant"
    return None


def spoil(answer: str, kind: MalformedKind, rng: random.Random) -> str:
    """The answer made malformed the way ``kind`` says (MIXED draws a way from ``rng``)."""
    kind = MalformedKind(kind)  # a knob set at runtime may be a plain string
    if kind is MalformedKind.MIXED:
        kind = rng.choice(_SPOILERS)
    if kind is MalformedKind.PROSE:
        return f"Here is the JSON for these pages:\n{answer}\nLet me know if you need anything else."
    if kind is MalformedKind.FENCED:
        return f"```json\n{answer}\n```"
    if kind is MalformedKind.TRAILING_COMMA:
        head = answer.rstrip()
        return f"{head[:-1]},}}" if head.endswith("}") else head + ","
    return "I am unable to read these pages clearly enough to answer."
