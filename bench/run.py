"""The pipeline benchmark (a script, not a test), on generated scanned bundles.

    python bench/run.py --quick          # 6 bundles, ~170 pages: about a minute on 2 quiet cores
    python bench/run.py                  # 16 bundles, ~470 pages

Measures, on image-only pages with OCR off by default (``--ocr`` turns an engine on):
  single_process_pages_per_s   one process preparing chunk after chunk: render + encode (per-core limit)
  prepare_pages_per_s          the Ray prepare tasks on every core, launched as a run launches them
  prepare_efficiency           prepare / (cores x single)
  e2e_over_prepare             a whole run against a zero-latency emulator / the prepare stage alone
  batches, batches_lower_bound batches created / ⌈request bytes / BATCH_MAX_MB⌉ (5 MB here, so several)
  writer_peak_mb               the writer processes' summed RSS at its peak, against MAX_CONCURRENT_MB
  writers_started              writer processes the run started (one, then more while answered jobs wait)
Starts and stops its own local Ray; everything is written under a temporary folder.
Human-readable lines first, then one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from measure import Timing, figures, report, single_process
from scans import write_scanned_bundles
from stages import cores, end_to_end, in_folder, prepare_only, ray_environment, warm_up

from raybatch.settings import Settings, load_settings


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="6 bundles (unless --bundles is given)")
    parser.add_argument("--bundles", type=int, default=None, help="scanned bundles (default 16, quick 6)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--batch-max-mb", type=int, default=5, help="BATCH_MAX_MB for the run")
    parser.add_argument("--poll-interval", type=float, default=1.0, help="POLL_INTERVAL for the run")
    parser.add_argument("--max-concurrent-mb", type=int, default=None, help="MAX_CONCURRENT_MB")
    parser.add_argument("--result-workers", type=int, default=None, help="RESULT_WORKERS")
    parser.add_argument("--ocr", default="none", help="OCR_ENGINE for every stage (default none)")
    parser.add_argument("--repeat", type=int, default=2, help="best of N for the two throughput figures")
    return parser.parse_args(argv)


def bench_settings(args: argparse.Namespace, home: Path) -> Settings:
    """The environment's settings with the benchmark's knobs on top."""
    settings = load_settings(
        raybatch_home=home,
        ocr_engine=args.ocr,
        batch_max_mb=args.batch_max_mb,
        poll_interval=args.poll_interval,
        max_concurrent_mb=args.max_concurrent_mb,
        result_workers=args.result_workers,
    )
    return settings.model_copy(update={"ray_address": None})  # always a local Ray of our own


def measure(settings: Settings, paths: list[Path], home: Path, repeat: int) -> dict[str, Any]:
    """Single process, then the Ray stages on a local Ray of our own; throughputs are best of ``repeat``."""
    import ray

    from raybatch.shells.runtime import connect

    single = best(single_process(settings, paths) for _ in range(repeat))
    print(f"single process: {single.pages} pages in {single.seconds:.1f} s", flush=True)
    connect(settings, dashboard=False)
    try:
        cpus = cores()
        warm_up(in_folder(settings, home / "warm"), paths[0], 2 * cpus)
        prepare = best(prepare_only(in_folder(settings, home / f"prepare{i}"), paths) for i in range(repeat))
        print(f"Ray prepare stage: {prepare.pages} pages in {prepare.seconds:.1f} s", flush=True)
        e2e = end_to_end(in_folder(settings, home / "e2e"), paths)
        print(f"end to end: {e2e.jobs} jobs ({e2e.failed} failed) in {e2e.seconds:.1f} s", flush=True)
    finally:
        ray.shutdown()
    return figures(settings, cpus, single, prepare, e2e)


def best(timings: Iterable[Timing]) -> Timing:
    """The fastest of several timings of the same work: the one least disturbed by other load."""
    return min(timings, key=lambda t: t.seconds)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    bundles = args.bundles or (6 if args.quick else 16)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    ray_environment()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="raybatch-bench-") as tmp:
        home = Path(tmp)
        started = time.perf_counter()
        paths = write_scanned_bundles(home / "scans", bundles, args.seed)
        print(f"{len(paths)} scanned bundles written in {time.perf_counter() - started:.1f} s", flush=True)
        result = measure(bench_settings(args, home), paths, home, max(1, args.repeat))
    # other work on the machine skews every figure: say how busy it was, at the start and the end
    result["load_average_1m"] = [round(load, 2) for load in (load_before, os.getloadavg()[0])]
    report(result)
    return 0 if result["jobs_failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
