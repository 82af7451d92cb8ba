"""The console's commands: what ``make demo`` ends with, and the benchmark on a tiny database."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from raybatch.cli import _parser
from raybatch.commands import console_command
from raybatch.settings import load_settings

BENCH = Path(__file__).resolve().parents[2] / "bench" / "console.py"


def test_the_demo_ends_with_a_serve_command_that_parses_and_hides_the_password(tmp_path: Path) -> None:
    settings = load_settings(database_url="postgresql+psycopg://rb:hunter22@db/rb", store=str(tmp_path / "s"))
    command = console_command(settings)
    assert "hunter22" not in command and command.startswith("raybatch serve --db postgresql")
    args = _parser().parse_args(command.split()[1:])
    assert args.store == str(tmp_path / "s") and args.port == 8700 and args.host == "127.0.0.1"


def test_the_console_benchmark_measures_every_page(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bench_console", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    args = bench.parse(["--jobs", "40", "--pages", "16", "--repeat", "1", "--no-browser"])
    figures = bench.measure(args, tmp_path)
    assert figures["jobs"] == 41 and figures["job_pages"] == 16
    for page in ("runs", "jobs", "jobs_deep", "job"):
        assert figures[f"{page}_first_byte_ms"] <= figures[f"{page}_page_ms"]


def test_raybatch_serve_serves_the_console_on_loopback(tmp_path: Path) -> None:
    import socket
    import subprocess
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    db, store = f"sqlite:///{tmp_path / 'state.db'}", str(tmp_path / "store")
    command = [
        sys.executable,
        "-m",
        "raybatch.cli",
        "serve",
        "--port",
        str(port),
        "--db",
        db,
        "--store",
        store,
    ]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline, page = time.monotonic() + 60, ""
        while not page and time.monotonic() < deadline and server.poll() is None:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read().decode()
            except OSError:
                time.sleep(0.2)
        assert "Runs on this database" in page
    finally:
        server.terminate()
        output = server.communicate(timeout=30)[0]
    assert f"raybatch console on http://127.0.0.1:{port}/" in output
    assert "sqlite" not in output  # the database URL is not logged
