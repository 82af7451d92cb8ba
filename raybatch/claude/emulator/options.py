"""Command-line options of ``raybatch emulator``: the config's plain knobs plus faults as JSON."""

from __future__ import annotations

import argparse
from pathlib import Path

from raybatch.claude.emulator.config import EmulatorConfig, Faults


def add_emulator_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the emulator's options to ``parser`` (the CLI adds --host/--port itself)."""
    parser.add_argument("--processing-seconds", type=float, default=2.0, help="time a batch takes to end")
    parser.add_argument("--api-key", default=None, help="require this key (Bearer or x-api-key)")
    parser.add_argument("--public-url", default=None, help="base of results_url (default: the Host used)")
    parser.add_argument("--faults", default=None, help="fault knobs as JSON, e.g. '{\"latency\": 0.1}'")
    parser.add_argument("--faults-file", type=Path, default=None, help="fault knobs from a JSON file")
    parser.add_argument("--seed", type=int, default=None, help="seed of the fault draws")


def config_from_arguments(args: argparse.Namespace) -> EmulatorConfig:
    """An EmulatorConfig from the options added by ``add_emulator_arguments``."""
    faults = Faults()
    if args.faults_file is not None:
        faults = Faults.from_json(args.faults_file.read_text(encoding="utf-8"))
    if args.faults is not None:
        faults = Faults.from_json(args.faults)
    if args.seed is not None:
        faults.seed = args.seed
    return EmulatorConfig(
        api_key=args.api_key,
        processing_seconds=args.processing_seconds,
        public_url=args.public_url,
        faults=faults,
    )
