"""Prices per model, and the one function every cost figure comes from.

A cost is computed from tokens *and the mode each request was actually sent with*: the Message
Batches API bills ``batch_discount`` of the list price, synchronous calls the list price. The manifest,
``status``, the metrics and ``estimate`` all call ``cost_usd``, so their figures agree.

The defaults were taken on ``PRICES_TAKEN`` from ``PRICES_SOURCE`` (US dollars per million tokens;
cache writes at the 5-minute rate, which is what ``cache_control: ephemeral`` buys). ``CLAUDE_PRICES``
overrides them with JSON: ``{"claude-x": {"input": 1, "output": 5, "cache_write": 1.25,
"cache_read": 0.1, "batch_discount": 0.5}}``. A model is priced by its own id, else by the longest
listed prefix of it (``claude-sonnet-5-5-20260601`` by ``claude-sonnet-5-5``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields

from raybatch.errors import ConfigError
from raybatch.models import ChunkRecord, ProcessingMode, Usage

PRICES_TAKEN = "2026-11-30"
PRICES_SOURCE = "https://platform.claude.com/docs/en/about-claude/pricing"


@dataclass(frozen=True)
class ModelPrices:
    """US dollars per million tokens at the list (synchronous) price, and the batch discount."""

    input: float
    output: float
    cache_write: float
    cache_read: float
    batch_discount: float = 0.5  # the Message Batches API bills half

    def factor(self, mode: ProcessingMode) -> float:
        """What share of the list price a request sent in ``mode`` pays."""
        return self.batch_discount if mode == ProcessingMode.BATCH else 1.0


DEFAULT_PRICES: dict[str, ModelPrices] = {
    "claude-opus-5-5": ModelPrices(4.0, 20.0, 5.0, 0.40),
    "claude-opus-5": ModelPrices(5.0, 25.0, 6.25, 0.50),
    "claude-sonnet-5-5": ModelPrices(2.0, 10.0, 2.50, 0.20),
    "claude-sonnet-5": ModelPrices(2.0, 10.0, 2.50, 0.20),
    "claude-opus-4-5": ModelPrices(5.0, 25.0, 6.25, 0.50),
    "claude-opus-4-1": ModelPrices(15.0, 75.0, 18.75, 1.50),
    "claude-opus-4-0": ModelPrices(15.0, 75.0, 18.75, 1.50),
    "claude-sonnet-4": ModelPrices(3.0, 15.0, 3.75, 0.30),
    "claude-haiku-4-5": ModelPrices(1.0, 5.0, 1.25, 0.10),
    "claude-3-5-haiku": ModelPrices(0.80, 4.0, 1.0, 0.08),
}


def price_table(override: str | None = None) -> dict[str, ModelPrices]:
    """The default prices with ``CLAUDE_PRICES`` (JSON) laid over them."""
    table = dict(DEFAULT_PRICES)
    if not override:
        return table
    try:
        given = json.loads(override)
        names = {f.name for f in fields(ModelPrices)}
        for model, values in given.items():
            unknown = set(values) - names
            if unknown:
                raise ValueError(f"unknown price fields {sorted(unknown)}")
            base = table.get(model)
            merged = ({f: getattr(base, f) for f in names} if base else {}) | values
            table[model] = ModelPrices(**{k: float(v) for k, v in merged.items()})
    except (ValueError, TypeError, AttributeError) as exc:
        raise ConfigError(f"invalid settings: CLAUDE_PRICES: {exc}") from None
    return table


def prices_for(model: str, override: str | None = None) -> ModelPrices:
    """The prices of ``model``: its own entry, else the longest listed prefix; ConfigError if none."""
    table = price_table(override)
    matches = [name for name in table if model == name or model.startswith(name + "-")]
    if not matches:
        raise ConfigError(f"no price for model {model!r}: add it to CLAUDE_PRICES")
    return table[max(matches, key=len)]


def list_price_usd(usage: Usage, prices: ModelPrices) -> float:
    """What the tokens cost at the list price."""
    return (
        usage.input_tokens * prices.input
        + usage.output_tokens * prices.output
        + usage.cache_creation_tokens * prices.cache_write
        + usage.cache_read_tokens * prices.cache_read
    ) / 1_000_000


def cost_usd(usage_by_mode: Mapping[ProcessingMode, Usage], prices: ModelPrices) -> float:
    """The cost of requests, given their tokens by the mode they were sent with; rounded once."""
    total = sum(list_price_usd(usage, prices) * prices.factor(mode) for mode, usage in usage_by_mode.items())
    return round(total, 6)


def add_usage(usages: Iterable[Usage]) -> Usage:
    """One Usage for many."""
    items = list(usages)
    return Usage(
        input_tokens=sum(u.input_tokens for u in items),
        output_tokens=sum(u.output_tokens for u in items),
        cache_read_tokens=sum(u.cache_read_tokens for u in items),
        cache_creation_tokens=sum(u.cache_creation_tokens for u in items),
    )


def usage_by_mode(chunks: Iterable[ChunkRecord]) -> dict[ProcessingMode, Usage]:
    """Chunks' tokens by the mode each was sent with (a chunk never sent brings no tokens)."""
    grouped: dict[ProcessingMode, list[Usage]] = {}
    for chunk in chunks:
        grouped.setdefault(chunk.sent_mode or ProcessingMode.BATCH, []).append(chunk.usage)
    return {mode: add_usage(usages) for mode, usages in grouped.items()}


# Output tokens a page brings, measured on the sample corpus (the answer's JSON per chunk over its
# pages); the estimate and the spend cap use it before any answer exists.
EXPECTED_OUTPUT_TOKENS_PER_PAGE = 44
