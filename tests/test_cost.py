"""The price table and the one cost function."""

from __future__ import annotations

import pytest

from raybatch.cost import DEFAULT_PRICES, ModelPrices, cost_usd, price_table, prices_for
from raybatch.errors import ConfigError
from raybatch.models import Usage

USAGE = Usage(input_tokens=123_457, output_tokens=9_871, cache_read_tokens=3_333, cache_creation_tokens=1_111)


def test_batch_and_sync_differ_by_exactly_the_batch_discount() -> None:
    for prices in DEFAULT_PRICES.values():
        sync, batch = cost_usd({"sync": USAGE}, prices), cost_usd({"batch": USAGE}, prices)
        assert batch == pytest.approx(sync * prices.batch_discount, abs=1e-6)
        assert sync > batch > 0


def test_every_token_kind_is_priced() -> None:
    prices = ModelPrices(input=1, output=10, cache_write=100, cache_read=1000, batch_discount=0.5)
    assert cost_usd({"sync": Usage(1_000_000, 0, 0, 0)}, prices) == 1
    assert cost_usd({"sync": Usage(0, 1_000_000, 0, 0)}, prices) == 10
    assert cost_usd({"sync": Usage(0, 0, 0, 1_000_000)}, prices) == 100
    assert cost_usd({"sync": Usage(0, 0, 1_000_000, 0)}, prices) == 1000


def test_models_are_priced_by_id_or_longest_prefix() -> None:
    assert prices_for("claude-sonnet-5-5") == DEFAULT_PRICES["claude-sonnet-5-5"]
    assert prices_for("claude-opus-4-1-20250805") == DEFAULT_PRICES["claude-opus-4-1"]
    assert prices_for("claude-opus-5-5-20260601") == DEFAULT_PRICES["claude-opus-5-5"]
    with pytest.raises(ConfigError, match="CLAUDE_PRICES"):
        prices_for("gpt-9")


def test_a_setting_overrides_or_adds_prices() -> None:
    table = price_table(
        '{"claude-sonnet-5-5": {"input": 9}, "my-model": {"input": 1, "output": 2, '
        '"cache_write": 1.25, "cache_read": 0.1, "batch_discount": 1}}'
    )
    assert table["claude-sonnet-5-5"].input == 9 and table["claude-sonnet-5-5"].output == 10
    own = '{"my-model": {"input": 1, "output": 2, "cache_write": 1, "cache_read": 0}}'
    assert prices_for("my-model", own).input == 1
    with pytest.raises(ConfigError, match="CLAUDE_PRICES"):
        price_table('{"claude-sonnet-5-5": {"inptu": 1}}')
    with pytest.raises(ConfigError, match="CLAUDE_PRICES"):
        price_table("not json")
