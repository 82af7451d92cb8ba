"""Ray job entrypoint: process every PDF or image under SOURCE on the cluster the job was submitted to.

    ray job submit --working-dir . -- python jobs/process.py SOURCE [--store S] [--db URL] [--mode M]
        [--emulator] [--max-cost-usd USD]

Without ANTHROPIC_API_KEY it stops at once (exit 2) unless ``--emulator`` (RAYBATCH_EMULATOR=1) asks
for the built-in rule-based emulator.

Every other knob comes from the environment (see README, "Running on a cluster"). Prints a progress
line every few seconds, then a summary and the failures; exits 1 when any job failed, 2 on bad
settings. Submitting the same SOURCE again resumes: files already registered are the same jobs.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence

import ray

from raybatch.errors import ConfigError, RaybatchError
from raybatch.flags import add_setting_flags, setting_overrides
from raybatch.loops.driver import Progress
from raybatch.pipeline import RunReport, run
from raybatch.report import failures, status_summary
from raybatch.settings import Settings, StateSettings, load_settings, model_prices
from raybatch.shells.runtime import limit_oom_retries
from raybatch.state import open_state

PROGRESS_EVERY = 5.0  # seconds between progress lines
# The settings taken as flags (``--db`` sets DATABASE_URL): raybatch.flags derives the rest.
SETTING_FLAGS = (
    "store",
    "database_url",
    "processing_mode",
    "raybatch_emulator",
    "max_cost_usd",
    "split_mode",
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job; the exit code is the job's status for `ray job status`."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        settings = load_settings(**setting_overrides(args, (*SETTING_FLAGS, "classes_file")))
        settings.require_claude()
        join_cluster(settings)
        report = run(
            settings,
            args.source,
            force=args.force,
            on_progress=ProgressLines(every=args.every),
            notice=lambda text: print(f"notice: {text}", flush=True),
            dashboard=False,
        )
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    except RaybatchError as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
    print_summary(settings, report)
    return 0 if report.ok else 1


def join_cluster(settings: Settings) -> None:
    """Join the cluster of the submission (`ray job submit` sets RAY_ADDRESS) in the fixed namespace.

    Without RAY_ADDRESS (the script run by hand), ``run`` starts a local Ray with the writers' resource.
    """
    if settings.ray_address and not ray.is_initialized():
        limit_oom_retries(settings)
        ray.init(namespace=settings.ray_namespace, log_to_driver=False)


class ProgressLines:
    """Prints one progress line every ``every`` seconds, and the last one whatever the time."""

    def __init__(
        self,
        every: float = PROGRESS_EVERY,
        write: Callable[[str], None] = lambda line: print(line, flush=True),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._every, self._write, self._monotonic = every, write, monotonic
        self._last: float | None = None

    def __call__(self, progress: Progress) -> None:
        now = self._monotonic()
        finished = progress.total > 0 and progress.done == progress.total
        if finished or self._last is None or now - self._last >= self._every:
            self._last = now
            self._write(progress_line(progress))


def progress_line(progress: Progress) -> str:
    """``progress: jobs 3/6 done (completed 3, writing 1, ...), pages 120/172, batches 1, ...``."""
    stages = ", ".join(f"{status} {n}" for status, n in sorted(progress.by_status.items()))
    return (
        f"progress: jobs {progress.done}/{progress.total} done ({stages}), "
        f"pages {progress.pages_prepared}/{progress.pages_total}, batches {progress.active_batches}, "
        f"writers {progress.writer_mb:.0f} MB, documents {progress.documents}, "
        f"{progress.elapsed:.0f} s{' [paused]' if progress.paused else ''}"
        f"{f' [parked: {progress.parked}]' if progress.parked else ''}"
    )


def print_summary(settings: Settings, report: RunReport) -> None:
    """The run's figures as lines, each failure with its reason, then one JSON object on the last line."""
    state = open_state(settings.section(StateSettings))
    summary = status_summary(state, model_prices(settings), [j.id for j in report.jobs])
    counts = ", ".join(f"{status} {n}" for status, n in summary["by_status"].items() if n)
    print(
        f"summary: jobs {summary['jobs']} ({counts}), pages {summary['pages']}, "
        f"documents {summary['documents']}, tokens {summary['input_tokens']} in / "
        f"{summary['output_tokens']} out, estimated cost ${summary['estimated_cost_usd']:.4f}, "
        f"{report.elapsed:.1f} s"
    )
    failed = failures(report.jobs)
    for job_id, name, reason in failed:
        print(f"failed: job {job_id} ({name}): {reason}")
    print(json.dumps({**summary, "failed": len(failed), "elapsed_s": round(report.elapsed, 2)}), flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jobs/process.py", description=__doc__.splitlines()[0])
    parser.add_argument("source", help="a folder, a file, or s3://bucket/prefix")
    add_setting_flags(parser, SETTING_FLAGS)
    parser.add_argument(
        "--classes", dest="classes_file", metavar="FILE", help="the classes file (CLASSES_FILE)"
    )
    parser.add_argument("--force", action="store_true", help="new jobs even for files seen before")
    parser.add_argument("--every", type=float, default=PROGRESS_EVERY, help="seconds between progress lines")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    return parser


if __name__ == "__main__":
    sys.exit(main())
