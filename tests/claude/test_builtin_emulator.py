"""The built-in emulator a run starts answers only calls that carry the key made for that run, so
on a cluster (where it listens on the node's address) no one else on the network can use it."""

from __future__ import annotations

import httpx

from raybatch.pipeline import builtin_emulator
from raybatch.settings import load_settings

MESSAGE = {"model": "claude-sonnet-4-5", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}


def test_the_built_in_emulator_refuses_calls_without_the_runs_key() -> None:
    settings = load_settings(raybatch_emulator=True)
    with builtin_emulator(settings, "127.0.0.1") as (emulated, url):
        key = emulated.anthropic_api_key
        assert key is not None and len(key.get_secret_value()) >= 24
        headers = {"anthropic-version": "2023-06-01"}
        anyone = httpx.post(f"{url}/v1/messages", json=MESSAGE, headers=headers, timeout=10)
        guessed = httpx.post(
            f"{url}/v1/messages", json=MESSAGE, headers={**headers, "x-api-key": "emulator"}, timeout=10
        )
        holder = httpx.post(
            f"{url}/v1/messages",
            json=MESSAGE,
            headers={**headers, "x-api-key": key.get_secret_value()},
            timeout=10,
        )
    assert anyone.status_code == 401 and guessed.status_code == 401
    assert holder.status_code == 200
