"""A Ray head of the tests' own: `ray start --head --block` with its own temp dir and ports.

Its dashboard listens on 127.0.0.1 only, and its addresses are loopback ones; Ray itself turns
``--node-ip-address=127.0.0.1`` into the machine's routable address for its node processes.

It is stopped by signalling the `ray start` process it launched (which tears down its own node) and
then ending any process still running from its temp dir: never `ray stop`, which ends every Ray on
the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


def free_ports(count: int) -> list[int]:
    """Ports free on loopback right now, all different."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def ray_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment with the venv first on PATH and Ray's telemetry and token auth off."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update({**RAY_ENV, **(extra or {})})
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


@dataclass
class RayHead:
    """One head node on 127.0.0.1 with its own temp dir; ``start`` waits until it answers."""

    num_cpus: int = 2
    resources: Mapping[str, float] = field(default_factory=dict)
    dashboard: bool = True
    autoscaling_config: Path | None = None
    system_config: Mapping[str, object] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    # The temp dir is <root>/ray, Ray's own layout under RAY_TMPDIR=<root>: a process given that
    # RAY_TMPDIR finds this head where `ray start` records it, as on a node of a real cluster.
    default_layout: bool = False

    def __post_init__(self) -> None:
        # Short: Ray's unix sockets live under the temp dir and their paths are capped at 107 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="rb-", dir="/tmp"))
        self.temp_dir = self.root / "ray" if self.default_layout else self.root
        self.temp_dir.mkdir(exist_ok=True)
        gcs, dash, client, metrics, agent_http, agent_grpc, env_agent, nm, om = free_ports(9)
        self.gcs_port, self.dashboard_port, self.metrics_port = gcs, dash, metrics
        self._ports = {
            "--port": gcs,
            "--dashboard-port": dash,
            "--ray-client-server-port": client,
            "--metrics-export-port": metrics,
            "--dashboard-agent-listen-port": agent_http,
            "--dashboard-agent-grpc-port": agent_grpc,
            "--runtime-env-agent-port": env_agent,
            "--node-manager-port": nm,
            "--object-manager-port": om,
        }
        self._process: subprocess.Popen[bytes] | None = None
        self._log: BinaryIO | None = None

    @property
    def address(self) -> str:
        """The GCS address, for ``ray.init(address=...)``."""
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def dashboard_url(self) -> str:
        """The dashboard (and job submission) address."""
        return f"http://127.0.0.1:{self.dashboard_port}"

    def command(self) -> list[str]:
        """The `ray start` command line."""
        cmd = [str(VENV_BIN / "ray"), "start", "--head", "--block", "--disable-usage-stats"]
        cmd += ["--node-ip-address=127.0.0.1", f"--temp-dir={self.temp_dir}", f"--num-cpus={self.num_cpus}"]
        cmd += [f"{flag}={port}" for flag, port in self._ports.items()]
        cmd += ["--min-worker-port=0", "--max-worker-port=0"]
        if self.resources:
            cmd.append(f"--resources={json.dumps(dict(self.resources))}")
        if self.dashboard:
            cmd += ["--include-dashboard=true", "--dashboard-host=127.0.0.1"]
        else:
            cmd.append("--include-dashboard=false")
        if self.autoscaling_config is not None:
            cmd.append(f"--autoscaling-config={self.autoscaling_config}")
        if self.system_config:
            cmd.append(f"--system-config={json.dumps(dict(self.system_config), separators=(',', ':'))}")
        return cmd

    def start(self, timeout: float | None = None) -> RayHead:
        """Launch the head and wait until it says it started (and the dashboard, if any, answers).
        By default a minute longer than Ray itself waits for its raylet (RAY_raylet_start_wait_time_s,
        raised on CI's loaded 2 cores), so that a slow start is Ray's to report, not cut short here."""
        if timeout is None:
            timeout = float(os.environ.get("RAY_raylet_start_wait_time_s", "60")) + 60.0  # noqa: SIM112 (Ray spells it so)
        self._log = (self.temp_dir / "ray-start.log").open("wb")
        self._process = subprocess.Popen(
            self.command(),
            env=ray_env(self.env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.temp_dir,
        )
        deadline = time.monotonic() + timeout
        while not self._answers():
            if self._process.poll() is not None or time.monotonic() > deadline:
                printed = self.start_log()
                self.stop()
                raise RuntimeError(f"the Ray head did not come up:\n{printed}")
            time.sleep(0.5)
        return self

    def start_log(self, tail: int = 4000) -> str:
        """The end of what `ray start` printed."""
        path = self.temp_dir / "ray-start.log"
        return path.read_text(errors="replace")[-tail:] if path.exists() else ""

    def _answers(self) -> bool:
        if "Ray runtime started" not in self.start_log(tail=100_000):
            return False
        if not self.dashboard:
            return True
        try:
            with urllib.request.urlopen(f"{self.dashboard_url}/api/version", timeout=2) as reply:
                return reply.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        """Stop this head only: signal its `ray start`, then end what still runs from its temp dir."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        for pid in session_pids(self.temp_dir):
            _end(pid)
        if self._log is not None:
            self._log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> RayHead:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def session_pids(temp_dir: Path) -> list[int]:
    """Processes whose command line names ``temp_dir``: the node's own and its workers'."""
    mine, needle = [], str(temp_dir).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline:
            mine.append(int(entry.name))
    return mine


def _end(pid: int, grace: float = 5.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
