"""The writer benchmark (a script, not a test): one ResultWriter in this process, small answered jobs.

    python bench/writer.py                 # 300 one-page text PDFs, written in groups of 8
    python bench/writer.py --files 100 --group 16

It prepares its answered jobs once (one ``raybatch run`` of the files against the built-in emulator,
on a local Ray of its own; kept under --home for the next time), sets them back to answered, and
times one in-process ResultWriter writing them with ``write_group``, claimed --group at a time:
  cpu_ms_per_job          CPU of this process (every thread: the writer's pool too), per job
  statements_per_job      SQL statements this process sent (claims included), per job
  wall_ms_per_job         wall-clock time, per job
Human-readable lines first, then one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from scale import Counted, bench_settings, whole_run, write_files
from stages import in_folder, ray_environment

from raybatch.models import JobStatus
from raybatch.objects import open_store
from raybatch.settings import Settings, StateSettings, StoreSettings
from raybatch.state import open_state
from raybatch.work.writer import ResultWriter


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--group", type=int, default=8, help="jobs a write_group call takes")
    parser.add_argument("--home", type=Path, default=Path("/tmp/raybatch-bench-writer"))
    return parser.parse_args(argv)


def prepared(home: Path, files: int) -> Settings:
    """The settings of a finished run of ``files`` one-page PDFs (made once, kept under ``home``)."""
    settings = in_folder(bench_settings(home), home / "run")
    ready = home / f"ready-{files}"
    if ready.exists():
        return settings
    import ray

    from raybatch.shells.runtime import connect

    shutil.rmtree(home, ignore_errors=True)
    write_files(home / "files", files)
    ray_environment()
    connect(settings, dashboard=False)
    try:
        whole_run(settings, home / "files")
    finally:
        ray.shutdown()
    ready.write_text("ready")
    return settings


def measure(settings: Settings, group: int) -> dict[str, float]:
    """The run's completed jobs set back to answered and written again by one writer."""
    state = open_state(settings.section(StateSettings))
    writer = ResultWriter.of_settings(state, open_store(settings.section(StoreSettings)), settings)
    done = [job.id for job in state.list_jobs([JobStatus.COMPLETED])]
    for job_id in done:
        state.transition(job_id, [JobStatus.COMPLETED], JobStatus.ANSWERED)
    cpu, wall = time.process_time(), time.perf_counter()
    with Counted() as counted:
        for start in range(0, len(done), group):
            leases = state.claim_jobs(
                worker_id="bench-writer",
                from_statuses=[JobStatus.ANSWERED],
                to_status=JobStatus.WRITING,
                lease_seconds=600,
                limit=group,
                job_ids=done[start : start + group],
            )
            reports = writer.write_group(leases)
            failed = [r for r in reports if r.status is not JobStatus.COMPLETED]
            assert not failed, failed
    jobs = max(1, len(done))
    return {
        "jobs": len(done),
        "group": group,
        "cpu_ms_per_job": 1000 * (time.process_time() - cpu) / jobs,
        "statements_per_job": counted.statements / jobs,
        "wall_ms_per_job": 1000 * (time.perf_counter() - wall) / jobs,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    figures = measure(prepared(args.home, args.files), args.group)
    print(f"jobs written           {figures['jobs']} in groups of {figures['group']}")
    print(f"cpu ms per job         {figures['cpu_ms_per_job']:.1f}")
    print(f"statements per job     {figures['statements_per_job']:.1f}")
    print(f"wall ms per job        {figures['wall_ms_per_job']:.1f}")
    print(json.dumps({key: round(value, 2) for key, value in figures.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
