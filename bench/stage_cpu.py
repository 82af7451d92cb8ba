"""CPU time of a run's Ray processes, by stage, from their process titles.

Ray names an actor's process after its class (``ray::ResultWriter-0-…:WriterActor``,
``ray::WriterActor.write_group`` while busy), so the writers' and the coordinator's CPU is exact.
Registration and prepare tasks share one pool of task workers (``ray::register …``, ``ray::prepare
job_7 chunk_0``, ``ray::IDLE`` between tasks, which is most of the time a sample sees): their
CPU is counted together as ``tasks``; ``bench/scale.py`` measures the prepare stage's share alone.
``ray`` is Ray's own processes (raylet, GCS, agents). Every ``every`` seconds each process's CPU
since the last look goes to the stage its title names, except that a process seen running an actor
counts all its CPU to that actor's stage: a worker becomes an actor after it started as ``ray::IDLE``
(its start, imports and ``__init__`` are the actor's, not the tasks'). Only this process's
descendants count (the local Ray it started).
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import psutil

ACTORS = (("WriterActor", "writers"), ("CoordinatorActor", "coordinator"), ("Agent", "ray"))  # name ends


def stage_of(title: str) -> str:
    """The stage a process title names: an actor's, ``tasks`` for a task worker, else ``ray``."""
    if not title.startswith("ray::"):
        return "ray"
    name = title[len("ray::") :].split(".")[0]
    return next((stage for actor, stage in ACTORS if name.endswith(actor)), "tasks")


class StageCpu:
    """Sums the CPU seconds of this process's descendants by stage while in the block."""

    # A look reads every process's /proc entries: at 50 ms apart, about 0.2 ms of CPU a small job,
    # taken from the run measured on the same cores. A title matters only for processes that
    # change it (task workers, whose stages are one), so looks far apart lose nothing.
    def __init__(self, every: float = 0.25, find_every: float = 0.5) -> None:
        self._every, self._find_every = every, find_every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="stage-cpu", daemon=True)
        self.titles: Counter[str] = Counter()  # the same CPU by process title (its first 40 characters)
        self._by_pid: dict[int, Counter[str]] = {}  # each process's CPU by the stage its title named
        self._last: dict[int, float] = {}
        self._procs: list[psutil.Process] = []
        self._found = -1e9

    def __enter__(self) -> StageCpu:
        self._sample(count=False)  # what the processes already running spent before counts not
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            self._sample()

    def _sample(self, count: bool = True) -> None:
        if time.monotonic() - self._found >= self._find_every:
            self._found, self._procs = time.monotonic(), psutil.Process().children(recursive=True)
        for proc in self._procs:
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    title = (proc.cmdline() or [""])[0]
            except psutil.Error:
                continue  # ended while we looked
            total = times.user + times.system
            before = self._last.get(proc.pid)
            self._last[proc.pid] = total
            if count:  # a process first seen now: its CPU so far goes to what it runs now
                self._by_pid.setdefault(proc.pid, Counter())[stage_of(title)] += total - (before or 0.0)
                self.titles[title[:40]] += total - (before or 0.0)

    @property
    def seconds(self) -> Counter[str]:
        """CPU seconds by stage; all of an actor's process goes to its actor's stage."""
        actors = {stage for _, stage in ACTORS if stage != "ray"}
        out: Counter[str] = Counter()
        for spent in self._by_pid.values():
            actor = next((stage for stage in spent if stage in actors), None)
            if actor is None:
                out.update(spent)
            else:
                out[actor] += sum(spent.values())
        return out

    def ms_per_job(self, jobs: int) -> dict[str, float]:
        """Each stage's CPU milliseconds per job."""
        return {stage: round(1000 * s / max(1, jobs), 2) for stage, s in sorted(self.seconds.items())}
