"""Urgent work during a backlog (a script, not a test): one bundle's time to documents, handed over
with ``submit(paths, urgent=True)`` while a batch-mode backlog runs, against the same bundle alone.

    python bench/urgent.py --quick       # 100 one-page files in the backlog: about a minute
    python bench/urgent.py               # 300

The backlog runs with two prepare tasks in flight (``RAYBATCH_PREPARE_IN_FLIGHT=2``, both cores
busy), so that it claims 64 jobs at a time for preparing (32 a task in flight, at least 64) and
some of it is still pending when the bundle comes.

Both runs answer through the emulator, whose batches end after ``--batch-seconds`` (a Message
Batch takes minutes in production; the synchronous path does not wait for it). Time to documents
is from the call to the moment the bundle's job is written (its documents, PDFs and thumbnails are
in the store). The goal: during the backlog at most twice the time alone. Also checked: the bundle
was sent synchronously only, written before every backlog job still pending when it came, and no
request was answered twice. Starts and stops its own local Ray; everything is written under a
temporary folder. Human-readable lines first, then one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pymupdf
from stages import in_folder, ray_environment

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.models import JobStatus
from raybatch.pipeline import RunReport, run, submit
from raybatch.settings import Settings, StateSettings, load_settings
from raybatch.state import SqlStateStore, open_state

GOAL_RATIO = 2.0


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100 backlog files (unless --backlog is given)")
    parser.add_argument("--backlog", type=int, default=None, help="one-page files in the backlog (300)")
    parser.add_argument("--bundle-pages", type=int, default=12, help="pages of the urgent bundle")
    parser.add_argument("--batch-seconds", type=float, default=5.0, help="how long an emulated batch takes")
    return parser.parse_args(argv)


def write_pdf(path: Path, texts: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = pymupdf.open()
    for text in texts:
        doc.new_page().insert_text((72, 72), text)
    doc.save(path)
    doc.close()
    return path


def write_inputs(home: Path, backlog: int, bundle_pages: int) -> tuple[Path, Path, Path]:
    """The backlog folder, the urgent bundle and a warm-up file."""
    for n in range(backlog):
        write_pdf(home / "backlog" / f"b_{n}.pdf", [f"INVOICE No B-{n}\nSeller: Acme Ltd\nTotal: {n}.00 USD"])
    pages = [f"INVOICE No U-{n}\nSeller: Urgent Ltd\nTotal: {n}.00 USD" for n in range(bundle_pages)]
    bundle = write_pdf(home / "urgent" / "bundle.pdf", pages)
    warm = write_pdf(home / "warm" / "warm.pdf", ["LETTER\nDear Sir"])
    return home / "backlog", bundle, warm


def bench_settings(home: Path, emulator: EmulatorServer) -> Settings:
    """Settings of one database and store under ``home``, answered by ``emulator``."""
    settings = load_settings(
        raybatch_home=home,
        ocr_engine="none",
        poll_interval=0.5,
        anthropic_base_url=emulator.base_url,
        anthropic_api_key="bench",
    )
    return in_folder(settings.model_copy(update={"ray_address": None}), home)  # a local Ray of our own


def time_to_documents(settings: Settings, bundle: Path) -> tuple[float, RunReport, dict[str, float]]:
    """Seconds from handing the bundle over until its job is written, and when (seconds from the
    same start) the job was first seen in each status."""
    started = time.time()
    seen: dict[str, float] = {}
    done = threading.Event()
    watcher = threading.Thread(target=watch, args=(settings, bundle.name, started, seen, done), daemon=True)
    watcher.start()
    try:
        report = submit(settings, [str(bundle)], urgent=True)
    finally:
        done.set()
        watcher.join()
    [job] = report.jobs
    assert job.status is JobStatus.COMPLETED and job.updated_at is not None, job
    return job.updated_at.timestamp() - started, report, seen


def watch(
    settings: Settings, name: str, started: float, seen: dict[str, float], done: threading.Event
) -> None:
    """Note when the job of ``name`` is first seen in each status (every 0.1 s)."""
    state = open_state(settings.section(StateSettings))
    while not done.wait(0.1):
        for job in state.list_jobs([s for s in JobStatus if not s.terminal]):
            if job.source_name == name:
                seen.setdefault(job.status.value, round(time.time() - started, 2))
    state.close()


def alone(settings: Settings, bundle: Path, warm: Path) -> tuple[float, dict[str, float]]:
    """The bundle on a database of its own, after a warm-up run there, its coordinator kept up (as
    the backlog keeps it up in the other case: its start is not what is measured)."""
    import ray

    from raybatch.shells.runtime import get_coordinator

    coordinator = get_coordinator(settings)
    ray.get(coordinator.snapshot.remote())
    run(settings, [str(warm)])
    seconds, _, phases = time_to_documents(settings, bundle)
    ray.kill(coordinator)
    return seconds, phases


def backlog_is_running(state: SqlStateStore, files: int) -> bool:
    """Every backlog file registered, some prepared already, several still pending."""
    counts = state.count_jobs()
    started = sum(counts.values()) - counts[JobStatus.PENDING] - counts[JobStatus.PREPARING]
    return sum(counts.values()) >= files and started >= 1 and counts[JobStatus.PENDING] >= 3


def start_backlog(settings: Settings, folder: Path, log: Path) -> subprocess.Popen[bytes]:
    """``raybatch run FOLDER`` in a process of its own on this Ray, as a backlog runs in production."""
    import ray

    env = {
        **os.environ,
        "RAY_ADDRESS": ray.get_runtime_context().gcs_address,
        "RAYBATCH_HOME": str(settings.raybatch_home),
        "DATABASE_URL": settings.database_url.get_secret_value(),
        "STORE": settings.store,
        "OCR_ENGINE": "none",
        "RAYBATCH_PREPARE_IN_FLIGHT": "2",  # a claim window of 64: the rest of the backlog waits pending
        "POLL_INTERVAL": str(settings.poll_interval),
        "ANTHROPIC_BASE_URL": settings.anthropic_base_url or "",
        "ANTHROPIC_API_KEY": "bench",
    }
    command = [sys.executable, "-m", "raybatch.cli", "run", str(folder), "--quiet", "--no-dashboard"]
    return subprocess.Popen(command, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def during(settings: Settings, folder: Path, files: int, bundle: Path) -> dict[str, Any]:
    """The bundle handed over while the backlog runs in another process on the same database and Ray."""
    state = open_state(settings.section(StateSettings))
    started = time.time()
    log = Path(settings.raybatch_home) / "backlog.log"
    backlog = start_backlog(settings, folder, log)
    try:
        while not backlog_is_running(state, files):
            assert backlog.poll() is None, f"the backlog ended first: {log.read_text()[-2000:]}"
            time.sleep(0.05)
        pending = {j.id for j in state.list_jobs([JobStatus.PENDING])}
        seconds, report, phases = time_to_documents(settings, bundle)
    finally:
        code = backlog.wait()
    [urgent] = report.jobs
    jobs = state.list_jobs()
    ended = {j.id: j.updated_at or datetime.max for j in jobs}
    modes = {c.sent_mode for c in state.get_chunks(urgent.id)}
    backlog_ended = max(ended.values()).timestamp() - started
    return {
        "seconds": seconds,
        "backlog_seconds": backlog_ended,
        "pending_at_arrival": len(pending),
        "written_first": all(ended[urgent.id] < ended[j] for j in pending),
        "sync_only": modes == {"sync"},
        "backlog_ok": code == 0,
        "phases": phases,
    }


def figures(
    args: argparse.Namespace, files: int, alone_s: float, seen: dict[str, Any], alone_phases: dict[str, float]
) -> dict[str, Any]:
    ratio = seen["seconds"] / alone_s if alone_s > 0 else float("inf")
    return {
        "backlog_files": files,
        "bundle_pages": args.bundle_pages,
        "batch_seconds": args.batch_seconds,
        "urgent_alone_s": round(alone_s, 2),
        "urgent_during_backlog_s": round(seen["seconds"], 2),
        "ratio": round(ratio, 2),
        "goal_ratio": GOAL_RATIO,
        "within_goal": ratio <= GOAL_RATIO,
        "backlog_s": round(seen["backlog_seconds"], 2),
        "backlog_pending_at_arrival": seen["pending_at_arrival"],
        "written_before_pending_backlog": seen["written_first"],
        "urgent_sent_sync_only": seen["sync_only"],
        "answered_twice": seen.get("answered_twice", 0),
        "backlog_ok": seen["backlog_ok"],
        # when the bundle's job was first seen in each status, seconds from the hand-over
        "alone_phases": alone_phases,
        "during_phases": seen.get("phases", {}),
    }


def report(result: dict[str, Any], say: Any = print) -> None:
    """Human-readable lines, then the JSON object alone on the last line."""
    r = result
    say(
        f"urgent bundle ({r['bundle_pages']} pages) to documents: alone {r['urgent_alone_s']:.2f} s, "
        f"during a {r['backlog_files']}-file batch backlog {r['urgent_during_backlog_s']:.2f} s "
        f"= {r['ratio']}x (goal <= {r['goal_ratio']}x)"
    )
    say(
        f"backlog: {r['backlog_pending_at_arrival']} jobs still pending when the bundle came, every one "
        f"written after it: {r['written_before_pending_backlog']}; backlog done in {r['backlog_s']:.1f} s; "
        f"bundle sent synchronously only: {r['urgent_sent_sync_only']}; answered twice: {r['answered_twice']}"
    )
    say(f"first seen in each status (s): alone {r['alone_phases']}; during {r['during_phases']}")
    import json

    say(json.dumps(result))


def main(argv: list[str] | None = None) -> int:
    import ray

    from raybatch.shells.runtime import connect

    args = parse(argv)
    files = args.backlog or (100 if args.quick else 300)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    ray_environment()
    os.environ["RAYBATCH_EMULATOR"] = "1"  # the emulator below answers; its answers are marked
    config = EmulatorConfig(processing_seconds=args.batch_seconds)
    # One emulator for each database: job ids, and so custom_ids, start at 1 in both.
    with (
        tempfile.TemporaryDirectory(prefix="raybatch-urgent-") as tmp,
        EmulatorServer(config) as first,
        EmulatorServer(config) as second,
    ):
        home = Path(tmp)
        folder, bundle, warm = write_inputs(home, files, args.bundle_pages)
        connect(bench_settings(home / "alone", first), dashboard=False)
        try:
            alone_s, alone_phases = alone(bench_settings(home / "alone", first), bundle, warm)
            print(f"alone: {alone_s:.2f} s", flush=True)
            seen = during(bench_settings(home / "during", second), folder, files, bundle)
        finally:
            ray.shutdown()
        per_chunk: Counter[str] = Counter()
        for sent, count in second.app.answers().items():  # a batch request's id carries a database mark
            per_chunk[re.sub(r"-[0-9a-f]{12}$", "", sent)] += count
        seen["answered_twice"] = sum(1 for count in per_chunk.values() if count > 1)
    result = figures(args, files, alone_s, seen, alone_phases)
    report(result)
    return 0 if result["backlog_ok"] and result["urgent_sent_sync_only"] else 1


if __name__ == "__main__":
    sys.exit(main())
