"""raybatch splits PDF bundles into classified documents with Ray and Claude; its commands are run,
estimate, demo, status, pause, resume, cancel, urgent, retry, eval, classes, samples, emulator,
workload, serve (the web console), users, review, redo, config and completion.

Thin: parse arguments, build the settings once, configure logging, call the library.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from raybatch import __version__
from raybatch.errors import ConfigError, RaybatchError
from raybatch.flags import add_setting_flags, setting_overrides
from raybatch.settings import Settings, StateSettings, load_settings, mask_url

log = logging.getLogger("raybatch")

# The settings each command takes as flags (``--db`` sets DATABASE_URL): raybatch.flags derives the rest.
LOCATION = ("database_url", "store")
TUNING = (
    "processing_mode",
    "result_workers",
    "max_concurrent_mb",
    "batch_size",
    "poll_interval",
    "ocr_engine",
    "page_modality",
)
SPEND = ("max_cost_usd", "max_daily_cost_usd")
SETTING_FLAGS: dict[str, tuple[str, ...]] = {
    "run": (*LOCATION, *TUNING, "raybatch_emulator", *SPEND),
    # What shapes the requests and their price; the writers, batching and caps play no part in it.
    "estimate": (*LOCATION, "processing_mode", "ocr_engine", "page_modality", "raybatch_emulator"),
    "demo": (*LOCATION, *TUNING),
    "status": LOCATION,
    "pause": LOCATION,
    "resume": (*LOCATION, *SPEND),
    "cancel": LOCATION,
    "urgent": LOCATION,
    "retry": LOCATION,
    "eval": LOCATION,
    "workload": ("database_url",),
    "serve": LOCATION,
    "users": ("database_url",),
    "review": LOCATION,
    "redo": (*LOCATION, *TUNING, "raybatch_emulator", *SPEND),
}
CLASSES = ("split_mode",)  # with --classes FILE (CLASSES_FILE), on run, estimate and demo
for _command in ("run", "estimate", "demo"):
    SETTING_FLAGS[_command] += CLASSES
_FLAGGED = {name for names in SETTING_FLAGS.values() for name in names} | {"classes_file"}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``raybatch`` command; returns the exit code."""
    parser = _parser()
    words = list(sys.argv[1:] if argv is None else argv)
    # After "--", ``workload hold`` takes a command to run, never raybatch's own options.
    cut = words.index("--") if "--" in words else len(words)
    if not {"workload", "hold"} <= set(words[:cut]):
        cut = len(words)
    head, verbose, config = _global_options(words[:cut])
    args = parser.parse_args(head)
    args.verbose, args.config = verbose, config
    args.after_dashes = words[cut + 1 :]
    from raybatch.terminal import log_through_rich

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


def _global_options(words: list[str]) -> tuple[list[str], bool, str | None]:
    """``-v`` and ``--config FILE`` anywhere on the line (before a ``--``): the rest, and their values."""
    rest: list[str] = []
    verbose, config = False, None
    it = iter(words)
    for word in it:
        if word in ("-v", "--verbose"):
            verbose = True
        elif word == "--config":
            config = next(it, None)
            if config is None:
                raise SystemExit(_fail("--config needs a FILE", 2))
        elif word.startswith("--config="):
            config = word.split("=", 1)[1]
        else:
            rest.append(word)
    return rest, verbose, config


def _fail(message: str, code: int) -> int:
    """One line on stderr, and the exit code."""
    print(f"raybatch: {message}", file=sys.stderr)
    return code


def settings_from(args: argparse.Namespace, **more: Any) -> Settings:
    """The settings: environment first, then the flags given on the command line (and ``more``)."""
    return load_settings(config_file=args.config, **{**more, **setting_overrides(args, _FLAGGED)})


def cmd_completion(args: argparse.Namespace) -> int:
    from raybatch.completion import bash_script, zsh_script

    print((bash_script if args.shell == "bash" else zsh_script)(_parser()), end="")
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from raybatch.config_view import show_config

    return show_config(config_file=args.config, as_json=args.json)


def cmd_run(args: argparse.Namespace) -> int:
    """``run``, and ``estimate`` (or ``run --dry-run``): the same flags, one sends and one counts."""
    from raybatch.commands import estimate_source, run_source

    settings, source = settings_from(args), args.source
    shown = {"as_json": args.json, "dashboard": not args.no_dashboard}
    if args.dry_run:
        return estimate_source(settings, source, sample=args.sample, **shown)
    progress, every = not args.quiet, args.every
    return run_source(
        settings, source, force=args.force, progress=progress, urgent=args.urgent, every=every, **shown
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from raybatch.commands import run_demo

    out = Path(args.out)
    settings = settings_from(args, raybatch_home=str(out))
    if settings.anthropic_api_key is None:  # the demo answers with the emulator unless a key is set
        settings = settings.model_copy(update={"raybatch_emulator": True})
        if settings.emulator_doubt is None:  # and doubts a little, so there is a review queue
            from raybatch.claude.emulator.doubt import DEMO_DOUBT

            settings = settings.model_copy(update={"emulator_doubt": json.dumps(DEMO_DOUBT)})
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

    return cancel_jobs(
        settings_from(args), args.jobs, every_live=args.all, source=args.source, as_json=args.json
    )


def cmd_urgent(args: argparse.Namespace) -> int:
    from raybatch.commands import urgent_jobs

    return urgent_jobs(settings_from(args), args.jobs, source=args.source, pull=args.pull, as_json=args.json)


def cmd_retry(args: argparse.Namespace) -> int:
    from raybatch.commands import retry_jobs

    return retry_jobs(settings_from(args), args.jobs, every_failed=args.failed, as_json=args.json)


def cmd_eval(args: argparse.Namespace) -> int:
    from raybatch.commands import read_truth, run_eval

    if args.reviewed:
        from raybatch.review.commands import run_eval_reviewed

        return run_eval_reviewed(settings_from(args), as_json=args.json)
    return run_eval(settings_from(args), read_truth(Path(args.truth)), as_json=args.json)


def cmd_review(args: argparse.Namespace) -> int:
    from raybatch.review.commands import run_review

    return run_review(settings_from(args), args)


def cmd_redo(args: argparse.Namespace) -> int:
    from raybatch.commands import Said
    from raybatch.review.redo import redo

    report, cost = redo(
        settings_from(args), args.target, fresh=args.fresh, progress=not (args.quiet or args.json)
    )
    said = Said(args.json)
    said.line(f"job {args.target}: asked again; its requests cost ${cost:.4f} so far (the redo included)")
    return said.end(0 if report.ok else 1, target=args.target, cost_usd=round(cost, 6))


def cmd_samples(args: argparse.Namespace) -> int:
    from raybatch.samples import write_samples
    from raybatch.samples.logistics import write_logistics

    if args.classes == "logistics":
        truth = write_logistics(Path(args.out), seed=args.seed)
    else:
        truth = write_samples(Path(args.out), bundles=args.bundles, seed=args.seed)
    documents = sum(len(b["documents"]) for b in truth["bundles"])
    from raybatch.commands import Said

    said = Said(args.json)
    said.line(f"wrote {len(truth['bundles'])} bundles ({documents} documents) and truth.json to {args.out}")
    return said.end(0, out=args.out, bundles=len(truth["bundles"]), documents=documents)


def cmd_emulator(args: argparse.Namespace) -> int:
    from raybatch.claude.emulator import config_from_arguments, serve

    serve(args.host, args.port, config_from_arguments(args))
    return 0


def cmd_workload(args: argparse.Namespace) -> int:
    from raybatch import terminal as console
    from raybatch import workload

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
    console.show(workload.snapshot(settings), console.workload_table, as_json=args.json)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from raybatch.console.serve import serve

    return serve(settings_from(args), args.host, args.port)


def cmd_users(args: argparse.Namespace) -> int:
    from raybatch.console.users import users_command

    return users_command(
        settings_from(args), args.users_command, args.name, args.role, args.password_stdin, as_json=args.json
    )


def _set_paused(args: argparse.Namespace, paused: bool) -> int:
    from raybatch.spend import raise_caps
    from raybatch.state import open_state

    settings = settings_from(args)
    state = open_state(settings.section(StateSettings), existing=True)
    if not paused:
        raise_caps(state, settings.max_cost_usd, settings.max_daily_cost_usd)
    state.set_paused(paused)
    from raybatch.commands import Said

    said = Said(args.json)
    said.line("paused: submissions and polls wait" if paused else "resumed")
    return said.end(0, paused=paused)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="raybatch", description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log progress details (anywhere on the line)"
    )
    parser.add_argument(
        "--config", metavar="FILE", help="a TOML settings file (default: ./raybatch.toml if present)"
    )
    parser.add_argument("--version", action="version", version=f"raybatch {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    _demo_parser(sub)
    for name, handler, text in (
        ("status", cmd_status, "jobs by status, batches, tokens and cost"),
        ("pause", cmd_pause, "hold submissions and polls (all runs on this database)"),
        ("resume", cmd_resume, "let submissions and polls go on; the spend flags raise the caps"),
    ):
        command = sub.add_parser(name, help=text)
        add_setting_flags(command, SETTING_FLAGS[name])
        command.set_defaults(handler=handler)
        _json_flag(command)
        if name == "status":
            command.add_argument("--jobs", action="store_true", help="list every job")
    cancel = sub.add_parser("cancel", help="cancel jobs: their work stops and their outputs are removed")
    cancel.add_argument("jobs", type=int, nargs="*", help="job ids")
    cancel.add_argument("--all", action="store_true", help="every job that has not ended")
    cancel.add_argument("--source", metavar="URI", help="the live jobs of a folder, file or s3:// prefix")
    add_setting_flags(cancel, SETTING_FLAGS["cancel"])
    _json_flag(cancel)
    cancel.set_defaults(handler=cmd_cancel)
    urgent = sub.add_parser("urgent", help="make registered jobs urgent: sent synchronously, first")
    urgent.add_argument("jobs", type=int, nargs="*", help="job ids")
    urgent.add_argument("--source", help="every job registered from this file, folder or s3:// prefix")
    urgent.add_argument("--pull", action="store_true", help="take jobs out of live batches if the API can")
    add_setting_flags(urgent, SETTING_FLAGS["urgent"])
    _json_flag(urgent)
    urgent.set_defaults(handler=cmd_urgent)
    retry = sub.add_parser("retry", help="take failed jobs up again (their answers are kept)")
    retry.add_argument("jobs", type=int, nargs="*", help="job ids")
    retry.add_argument("--failed", action="store_true", help="every failed job")
    add_setting_flags(retry, SETTING_FLAGS["retry"])
    _json_flag(retry)
    retry.set_defaults(handler=cmd_retry)
    _eval_parser(sub)
    _classes_parser(sub)
    samples = sub.add_parser("samples", help="write a sample corpus with truth.json")
    samples.add_argument("out", help="folder to write the bundles and truth.json into")
    _corpus_flags(samples)
    _json_flag(samples)
    samples.add_argument(
        "--classes",
        choices=["default", "logistics"],
        default="default",
        help="the corpus of a shipped classes file",
    )
    samples.set_defaults(handler=cmd_samples)
    _emulator_parser(sub)
    _workload_parser(sub)
    completion = sub.add_parser("completion", help="print a shell completion script")
    completion.add_argument(
        "shell", choices=["bash", "zsh"], help='the shell: eval "$(raybatch completion bash)"'
    )
    completion.set_defaults(handler=cmd_completion)
    config = sub.add_parser("config", help="the effective settings and where each came from (secrets masked)")
    config.add_argument("--json", action="store_true", help="print one JSON object")
    config.set_defaults(handler=cmd_config)
    _console_parsers(sub)
    _review_parser(sub)
    return parser


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _corpus_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bundles", type=_positive, default=6, help="sample bundles to write (default 6)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the sample corpus (default 7)")


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


def _run_parser(sub: Any) -> None:
    from raybatch.terminal import PROGRESS_EVERY

    run = sub.add_parser("run", help="process every PDF or image under SOURCE")
    _run_flags(run, SETTING_FLAGS["run"])
    run.add_argument("--force", action="store_true", help="new jobs even for files seen before")
    run.add_argument("--urgent", action="store_true", help="every file is urgent: sent synchronously, first")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    run.add_argument("--dry-run", action="store_true", help="estimate instead: prepare, count, send nothing")
    run.add_argument(
        "--every", type=float, default=PROGRESS_EVERY, help="seconds between progress lines off a terminal"
    )
    # -v after the source too (`ray job submit -- raybatch run SOURCE -v`); the top-level one stands.
    run.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log details")
    run.set_defaults(handler=cmd_run)
    estimate = sub.add_parser("estimate", help="prepare SOURCE and say what it will cost; send nothing")
    _run_flags(estimate, SETTING_FLAGS["estimate"])
    estimate.set_defaults(handler=cmd_run, dry_run=True)


def _classes_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--classes",
        dest="classes_file",
        metavar="FILE",
        help="the classes file (CLASSES_FILE); docs/classes.md",
    )


def _run_flags(run: argparse.ArgumentParser, settings: Sequence[str]) -> None:
    run.add_argument("source", help="a folder, a file, or s3://bucket/prefix")
    add_setting_flags(run, settings)
    _classes_flag(run)
    run.add_argument("--json", action="store_true", help="print one JSON object at the end")
    run.add_argument("--sample", type=int, help="estimate: requests counted at most (200)")
    run.add_argument("--no-dashboard", action="store_true", help="do not start the Ray dashboard")


def _demo_parser(sub: Any) -> None:
    demo = sub.add_parser("demo", help="write the sample corpus, process it, score the split")
    demo.add_argument("--out", default="raybatch-data/demo", help="folder for samples, store and state")
    _corpus_flags(demo)
    add_setting_flags(demo, SETTING_FLAGS["demo"])
    _classes_flag(demo)
    demo.add_argument("--quiet", action="store_true", help="no progress bars")
    demo.add_argument("--no-dashboard", action="store_true", help="do not start the Ray dashboard")
    demo.set_defaults(handler=cmd_demo)


def _classes_parser(sub: Any) -> None:
    command = sub.add_parser("classes", help="check a classes file, or show the default one")
    actions = command.add_subparsers(dest="classes_action", required=True)
    check = actions.add_parser("check", help="validate FILE: its classes, fields and prompt tokens")
    check.add_argument("file", help="a classes file (YAML), or a shipped one: default, logistics")
    _json_flag(check)
    check.set_defaults(handler=cmd_classes_check)
    show = actions.add_parser("show", help="print the default classes file, a starting point to copy")
    show.set_defaults(handler=cmd_classes_show)


def cmd_classes_check(args: argparse.Namespace) -> int:
    from raybatch.classes.report import check_report, check_summary

    if args.json:
        print(json.dumps(check_summary(args.file)))
    else:
        print(check_report(args.file))
    return 0


def cmd_classes_show(args: argparse.Namespace) -> int:
    from raybatch.classes.report import show_text

    print(show_text(), end="")
    return 0


def _eval_parser(sub: Any) -> None:
    command = sub.add_parser("eval", help="score the documents found against a truth.json")
    truth = command.add_mutually_exclusive_group(required=True)
    truth.add_argument(
        "--truth", metavar="FILE", help="a truth.json (as `samples` or `review export` writes)"
    )
    truth.add_argument(
        "--reviewed", action="store_true", help="score the model against the reviewed versions"
    )
    add_setting_flags(command, SETTING_FLAGS["eval"])
    command.add_argument("--json", action="store_true", help="print one JSON object")
    command.set_defaults(handler=cmd_eval)


def _emulator_parser(sub: Any) -> None:
    from raybatch.claude.emulator import add_emulator_arguments

    command = sub.add_parser("emulator", help="serve the Anthropic API emulator")
    command.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    command.add_argument(
        "--port", type=_port, default=8765, help="port to listen on, 0 for any (default 8765)"
    )
    add_emulator_arguments(command)
    command.set_defaults(handler=cmd_emulator)


def _workload_parser(sub: Any) -> None:
    command = sub.add_parser("workload", help="the workload budget: holders, units, expiry")
    add_setting_flags(command, SETTING_FLAGS["workload"])
    command.add_argument("--json", action="store_true", help="print one JSON object")
    command.set_defaults(handler=cmd_workload, workload_command=None)
    actions = command.add_subparsers(dest="workload_command")
    hold = actions.add_parser("hold", help="run a command while holding units of the budget")
    hold.add_argument("name", help="the holder's name, as the budget lists it")
    hold.add_argument("cost", type=int, help="units to hold")
    hold.add_argument("--ttl", type=float, help="lease seconds, renewed while the command runs")
    hold.add_argument("--wait", type=float, help="give up after this many seconds without room")
    add_setting_flags(hold, SETTING_FLAGS["workload"], default=argparse.SUPPRESS)  # the parent's stands
    hold.add_argument("run", nargs="*", metavar="-- COMMAND", help="the command and its arguments")


def _console_parsers(sub: Any) -> None:
    serve = sub.add_parser("serve", help="the web console over the database and the store")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (loopback unless a login)")
    serve.add_argument("--port", type=_port, default=8700, help="port to listen on (default 8700)")
    add_setting_flags(serve, SETTING_FLAGS["serve"])
    serve.set_defaults(handler=cmd_serve)
    users = sub.add_parser("users", help="the console's users and their roles; users add: a login")
    add_setting_flags(users, SETTING_FLAGS["users"])
    _json_flag(users)
    users.set_defaults(handler=cmd_users, users_command="list", name=None, role=None, password_stdin=False)
    actions = users.add_subparsers(dest="users_command")
    add = actions.add_parser("add", help="add a user, or change one's role and password")
    add.add_argument("name", help="the login name")
    add.add_argument(
        "--role", choices=["reviewer", "reader"], default="reader", help="reviewers correct, readers look"
    )
    _json_flag(add)
    add.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    add_setting_flags(add, SETTING_FLAGS["users"], default=argparse.SUPPRESS)  # the parent's stands


def _review_parser(sub: Any) -> None:
    from raybatch.review.arguments import add_redo_parser, add_review_parser

    add_review_parser(sub, SETTING_FLAGS["review"], cmd_review)
    add_redo_parser(sub, SETTING_FLAGS["redo"], cmd_redo)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
