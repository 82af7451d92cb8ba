"""``raybatch``: run, estimate, demo, status, pause, resume, cancel, urgent, eval, samples, emulator,
workload.

Thin: parse arguments, build the settings once, configure logging, call the library.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from raybatch import __version__
from raybatch.errors import ConfigError, RaybatchError
from raybatch.settings import (
    Modality,
    OcrEngineName,
    ProcessingMode,
    Settings,
    StateSettings,
    load_settings,
    mask_url,
)

log = logging.getLogger("raybatch")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``raybatch`` command; returns the exit code."""
    parser = _parser()
    words = list(sys.argv[1:] if argv is None else argv)
    # After "--", ``workload hold`` takes a command to run, never raybatch's own options.
    cut = words.index("--") if "--" in words else len(words)
    if not {"workload", "hold"} <= set(words[:cut]):
        cut = len(words)
    args = parser.parse_args(words[:cut])
    args.after_dashes = words[cut + 1 :]
    from raybatch.console import log_through_rich

    log_through_rich(logging.INFO if args.verbose else logging.WARNING)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except ConfigError as exc:
        return _fail(str(exc), 2)
    except RaybatchError as exc:
        return _fail(f"{type(exc).__name__}: {exc}", 1)
    except KeyboardInterrupt:
        return _fail("interrupted; run the same command again to resume", 130)
    except OSError as exc:  # a file or folder named on the command line (or in settings) is not usable
        reason = f"{exc.strerror}: {exc.filename}" if exc.strerror and exc.filename else str(exc)
        return _fail(reason, 1)
    except Exception as exc:  # an unforeseen error: still one line; -v logs where it came from
        if args.verbose:
            log.exception("the traceback")
        return _fail(f"unexpected {type(exc).__name__}: {mask_url(str(exc))} (-v shows the traceback)", 1)


def _fail(message: str, code: int) -> int:
    """One line on stderr, and the exit code."""
    print(f"raybatch: {message}", file=sys.stderr)
    return code


def settings_from(args: argparse.Namespace, **more: Any) -> Settings:
    """The settings: environment first, then the flags given on the command line (and ``more``)."""
    overrides = {
        **more,
        "database_url": getattr(args, "db", None),
        "store": getattr(args, "store", None),
        "processing_mode": getattr(args, "mode", None),
        "result_workers": getattr(args, "result_workers", None),
        "max_concurrent_mb": getattr(args, "max_concurrent_mb", None),
        "batch_size": getattr(args, "batch_size", None),
        "poll_interval": getattr(args, "poll_interval", None),
        "ocr_engine": getattr(args, "ocr_engine", None),
        "page_modality": getattr(args, "modality", None),
        "raybatch_emulator": True if getattr(args, "emulator", False) else None,
        "max_cost_usd": getattr(args, "max_cost_usd", None),
        "max_daily_cost_usd": getattr(args, "max_daily_cost_usd", None),
    }
    return load_settings(**overrides)


def cmd_run(args: argparse.Namespace) -> int:
    from raybatch.commands import run_source

    if args.dry_run:
        return cmd_estimate(args)
    return run_source(
        settings_from(args),
        args.source,
        force=args.force,
        as_json=args.json,
        progress=not args.quiet,
        dashboard=not args.no_dashboard,
        urgent=args.urgent,
    )


def cmd_estimate(args: argparse.Namespace) -> int:
    from raybatch.commands import estimate_source

    return estimate_source(
        settings_from(args),
        args.source,
        sample=args.sample,
        as_json=args.json,
        dashboard=not args.no_dashboard,
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from raybatch.commands import run_demo

    out = Path(args.out)
    settings = settings_from(args, raybatch_home=str(out))
    if settings.anthropic_api_key is None:  # the demo answers with the emulator unless a key is set
        settings = settings.model_copy(update={"raybatch_emulator": True})
    return run_demo(
        settings,
        out,
        bundles=args.bundles,
        seed=args.seed,
        progress=not args.quiet,
        dashboard=not args.no_dashboard,
    )


def cmd_status(args: argparse.Namespace) -> int:
    from raybatch.commands import show_status

    return show_status(settings_from(args), as_json=args.json, list_jobs=args.jobs)


def cmd_pause(args: argparse.Namespace) -> int:
    return _set_paused(args, True)


def cmd_resume(args: argparse.Namespace) -> int:
    return _set_paused(args, False)


def cmd_cancel(args: argparse.Namespace) -> int:
    from raybatch.commands import cancel_jobs

    return cancel_jobs(settings_from(args), args.jobs, every_live=args.all, source=args.source)


def cmd_urgent(args: argparse.Namespace) -> int:
    from raybatch.commands import urgent_jobs

    return urgent_jobs(settings_from(args), args.jobs, source=args.source, pull=args.pull)


def cmd_retry(args: argparse.Namespace) -> int:
    from raybatch.commands import retry_jobs

    return retry_jobs(settings_from(args), args.jobs, every_failed=args.failed)


def cmd_eval(args: argparse.Namespace) -> int:
    from raybatch.commands import read_truth, run_eval

    return run_eval(settings_from(args), read_truth(Path(args.truth)), as_json=args.json)


def cmd_samples(args: argparse.Namespace) -> int:
    from raybatch.samples import write_samples

    truth = write_samples(Path(args.out), bundles=args.bundles, seed=args.seed)
    documents = sum(len(b["documents"]) for b in truth["bundles"])
    print(f"wrote {len(truth['bundles'])} bundles ({documents} documents) and truth.json to {args.out}")
    return 0


def cmd_emulator(args: argparse.Namespace) -> int:
    from raybatch.claude.emulator import config_from_arguments, serve

    serve(args.host, args.port, config_from_arguments(args))
    return 0


def cmd_workload(args: argparse.Namespace) -> int:
    from raybatch import console, workload

    settings = settings_from(args)
    if args.workload_command == "hold":
        # Stopped with SIGTERM: end the command and give the units back now, not at the lease's end.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
        return workload.run_command(
            args.name,
            args.cost,
            args.run + args.after_dashes,
            settings=settings,
            ttl=args.ttl,
            timeout=args.wait,
            on_wait=lambda text: print(f"raybatch: {text}", file=sys.stderr),
        )
    budget = workload.snapshot(settings)
    if args.json:
        console.print_json(budget)
    else:
        console.console.print(console.workload_table(budget))
    return 0


def _set_paused(args: argparse.Namespace, paused: bool) -> int:
    from raybatch.spend import raise_caps
    from raybatch.state import open_state

    settings = settings_from(args)
    state = open_state(settings.section(StateSettings))
    if not paused:
        raise_caps(state, settings.max_cost_usd, settings.max_daily_cost_usd)
    state.set_paused(paused)
    print("paused: submissions and polls wait" if paused else "resumed")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="raybatch", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    parser.add_argument("--version", action="version", version=f"raybatch {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    _demo_parser(sub)
    for name, handler, text in (
        ("status", cmd_status, "jobs by status, batches, tokens and cost"),
        ("pause", cmd_pause, "hold submissions and polls (all runs on this database)"),
        ("resume", cmd_resume, "let submissions and polls go on"),
    ):
        command = sub.add_parser(name, help=text)
        _location_flags(command)
        command.set_defaults(handler=handler)
        if name == "resume":
            command.add_argument("--max-cost-usd", type=float, help="raise MAX_COST_USD of the run")
            command.add_argument("--max-daily-cost-usd", type=float, help="raise MAX_DAILY_COST_USD")
        if name == "status":
            command.add_argument("--json", action="store_true", help="print one JSON object")
            command.add_argument("--jobs", action="store_true", help="list every job")
    cancel = sub.add_parser("cancel", help="cancel jobs: their work stops and their outputs are removed")
    cancel.add_argument("jobs", type=int, nargs="*", help="job ids")
    cancel.add_argument("--all", action="store_true", help="every job that has not ended")
    cancel.add_argument("--source", metavar="URI", help="the live jobs of a folder, file or s3:// prefix")
    _location_flags(cancel)
    cancel.set_defaults(handler=cmd_cancel)
    urgent = sub.add_parser("urgent", help="make registered jobs urgent: sent synchronously, first")
    urgent.add_argument("jobs", type=int, nargs="*", help="job ids")
    urgent.add_argument("--source", help="every job registered from this file, folder or s3:// prefix")
    urgent.add_argument("--pull", action="store_true", help="take jobs out of live batches if the API can")
    _location_flags(urgent)
    urgent.set_defaults(handler=cmd_urgent)
    retry = sub.add_parser("retry", help="take failed jobs up again (their answers are kept)")
    retry.add_argument("jobs", type=int, nargs="*", help="job ids")
    retry.add_argument("--failed", action="store_true", help="every failed job")
    _location_flags(retry)
    retry.set_defaults(handler=cmd_retry)
    _eval_parser(sub)
    samples = sub.add_parser("samples", help="write a sample corpus with truth.json")
    samples.add_argument("out")
    samples.add_argument("--bundles", type=_positive, default=6)
    samples.add_argument("--seed", type=int, default=7)
    samples.set_defaults(handler=cmd_samples)
    _emulator_parser(sub)
    _workload_parser(sub)
    return parser


def _positive(text: str) -> int:
    """An argument that must be a whole number of at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def _port(text: str) -> int:
    """A TCP port: 0 (any free one) to 65535."""
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0 to 65535)")
    return int(text)


def _location_flags(command: argparse.ArgumentParser) -> None:
    command.add_argument("--db", help="state database URL (DATABASE_URL)")
    command.add_argument("--store", help="output folder or s3://bucket/prefix (STORE)")


def _run_parser(sub: Any) -> None:
    run = sub.add_parser("run", help="process every PDF or image under SOURCE")
    _run_flags(run)
    run.add_argument("--force", action="store_true", help="new jobs even for files seen before")
    run.add_argument("--urgent", action="store_true", help="every file is urgent: sent synchronously, first")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    run.add_argument("--dry-run", action="store_true", help="estimate instead: prepare, count, send nothing")
    run.set_defaults(handler=cmd_run)
    estimate = sub.add_parser("estimate", help="prepare SOURCE and say what it will cost; send nothing")
    _run_flags(estimate)
    estimate.set_defaults(handler=cmd_estimate)


def _run_flags(run: argparse.ArgumentParser) -> None:
    run.add_argument("source", help="a folder, a file, or s3://bucket/prefix")
    _location_flags(run)
    run.add_argument("--mode", choices=[m.value for m in ProcessingMode], help="PROCESSING_MODE of the jobs")
    _tuning_flags(run)
    run.add_argument("--emulator", action="store_true", help="answer with the built-in emulator (no key)")
    run.add_argument("--max-cost-usd", type=float, help="MAX_COST_USD: spend cap of this run")
    run.add_argument("--max-daily-cost-usd", type=float, help="MAX_DAILY_COST_USD: cap of a UTC day")
    run.add_argument("--json", action="store_true", help="print one JSON object at the end")
    run.add_argument("--sample", type=int, help="estimate: requests counted at most (200)")
    run.add_argument("--no-dashboard", action="store_true", help="do not start the Ray dashboard")


def _tuning_flags(command: argparse.ArgumentParser) -> None:
    command.add_argument("--result-workers", type=int, help="RESULT_WORKERS")
    command.add_argument("--max-concurrent-mb", type=int, help="MAX_CONCURRENT_MB")
    command.add_argument("--batch-size", type=int, help="BATCH_SIZE: jobs per submit pass")
    command.add_argument("--poll-interval", type=float, help="POLL_INTERVAL seconds")
    command.add_argument("--ocr-engine", choices=[e.value for e in OcrEngineName], help="OCR_ENGINE")
    command.add_argument("--modality", choices=[m.value for m in Modality], help="PAGE_MODALITY")


def _demo_parser(sub: Any) -> None:
    demo = sub.add_parser("demo", help="write the sample corpus, process it, score the split")
    demo.add_argument("--out", default="raybatch-data/demo", help="folder for samples, store and state")
    demo.add_argument("--bundles", type=_positive, default=6)
    demo.add_argument("--seed", type=int, default=7)
    _location_flags(demo)
    demo.add_argument("--mode", choices=[m.value for m in ProcessingMode], help="PROCESSING_MODE")
    _tuning_flags(demo)
    demo.add_argument("--quiet", action="store_true", help="no progress bars")
    demo.add_argument("--no-dashboard", action="store_true", help="do not start the Ray dashboard")
    demo.set_defaults(handler=cmd_demo)


def _eval_parser(sub: Any) -> None:
    command = sub.add_parser("eval", help="score the documents found against a truth.json")
    command.add_argument("--truth", required=True)
    _location_flags(command)
    command.add_argument("--json", action="store_true", help="print one JSON object")
    command.set_defaults(handler=cmd_eval)


def _emulator_parser(sub: Any) -> None:
    from raybatch.claude.emulator import add_emulator_arguments

    command = sub.add_parser("emulator", help="serve the Anthropic API emulator")
    command.add_argument("--host", default="127.0.0.1")
    command.add_argument("--port", type=_port, default=8765)
    add_emulator_arguments(command)
    command.set_defaults(handler=cmd_emulator)


def _workload_parser(sub: Any) -> None:
    command = sub.add_parser("workload", help="the workload budget: holders, units, expiry")
    command.add_argument("--db", help="state database URL (DATABASE_URL)")
    command.add_argument("--json", action="store_true", help="print one JSON object")
    command.set_defaults(handler=cmd_workload, workload_command=None)
    actions = command.add_subparsers(dest="workload_command")
    hold = actions.add_parser("hold", help="run a command while holding units of the budget")
    hold.add_argument("name", help="the holder's name, as the budget lists it")
    hold.add_argument("cost", type=int, help="units to hold")
    hold.add_argument("--ttl", type=float, help="lease seconds, renewed while the command runs")
    hold.add_argument("--wait", type=float, help="give up after this many seconds without room")
    hold.add_argument("--db", default=argparse.SUPPRESS, help="state database URL (DATABASE_URL)")
    hold.add_argument("run", nargs="*", metavar="-- COMMAND", help="the command and its arguments")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
