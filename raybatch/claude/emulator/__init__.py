"""A local emulator of Anthropic's Messages and Message Batches HTTP API, for the real SDK to talk to.

    with EmulatorServer(EmulatorConfig(processing_seconds=0)) as server:
        client = anthropic.Anthropic(api_key="any", base_url=server.base_url)
        server.faults.rate_limit_times = 1      # the next call answers 429 with retry-after

Modules: ``config`` (knobs), ``clock`` (a clock moved by hand), ``api`` (endpoints, no sockets),
``batches`` (batch state on a clock), ``faults`` (fault decisions), ``model`` (the default
rule-based responder), ``tokens`` (usage estimates), ``wire`` (JSON shapes), ``server`` (HTTP),
``options`` (CLI flags).
"""

from raybatch.claude.emulator.clock import ManualClock
from raybatch.claude.emulator.config import (
    EmulatorConfig,
    Faults,
    MalformedKind,
    Responder,
    SpendLimitKind,
)
from raybatch.claude.emulator.options import add_emulator_arguments, config_from_arguments
from raybatch.claude.emulator.server import EmulatorServer, serve

__all__ = [
    "EmulatorConfig",
    "EmulatorServer",
    "Faults",
    "MalformedKind",
    "ManualClock",
    "Responder",
    "SpendLimitKind",
    "add_emulator_arguments",
    "config_from_arguments",
    "serve",
]
