"""A run joining a cluster whose head holds every secret (cluster.yaml: the head's environment):
the processes that parse sources see none of them, and urgent work is never placed on the 0-CPU head."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from headnode import RayHead, ray_env

pytestmark = [pytest.mark.ray, pytest.mark.slow]

SECRETS = {
    "ANTHROPIC_API_KEY": "fake-anthropic-key-for-tests",
    "DATABASE_URL": "postgresql+psycopg://raybatch:pw-7a1c@db.invalid/raybatch",
    "MINIO_SECRET_KEY": "store-secret-5d2e",
}

PEEK = """
import os, sys, ray
from raybatch.settings import load_settings
from raybatch.shells.runtime import connect
from raybatch.shells.tasks import URGENT_CPUS
assert not connect(load_settings(raybatch_home=sys.argv[1]), dashboard=False)
NAMES = ("ANTHROPIC_API_KEY", "DATABASE_URL", "MINIO_SECRET_KEY")

@ray.remote(num_cpus=0)
def seen():  # a worker process on the head: what a source-parsing task there would see
    return sorted(f"{n}={os.environ.get(n)}" for n in NAMES if os.environ.get(n))

urgent = ray.remote(lambda: "ran").options(num_cpus=URGENT_CPUS).remote()
print(ray.get(seen.remote()), ray.wait([urgent], timeout=3)[0] == [])
ray.shutdown()
"""


def test_a_joined_clusters_workers_hold_no_secret_and_urgent_work_avoids_the_head(tmp_path: Path) -> None:
    with RayHead(num_cpus=0, dashboard=False, env=SECRETS) as head:  # the cluster's head: 0 CPU
        env = ray_env({**SECRETS, "RAY_ADDRESS": head.address})
        command = [sys.executable, "-c", PEEK, str(tmp_path)]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[] True", (
        "no secret seen; urgent work waits for a CPU node"
    )
