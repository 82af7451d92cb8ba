"""Autoscaling on Ray's fake multinode provider: writer demand for `result_mb` adds a writer node, the
writers run there, and the node goes away once idle.

The head declares no `result_mb`, like cluster.yaml's head. `ray.cluster_utils.AutoscalingCluster` would
need the `fake_multi_node/example.yaml` that the 2.60 wheel lacks, and it runs `ray stop --force` on the
whole machine; so the test writes the config itself and starts the head with `RayHead`, which stops
only what it started.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cluster_support import JOB_ENV, Corpus, job_args
from headnode import REPO, VENV_BIN, RayHead, ray_env
from ray.util.state import list_actors, list_nodes
from waiting import wait_for

from raybatch.report import evaluate_run
from raybatch.settings import StateSettings
from raybatch.state import open_state

pytestmark = [pytest.mark.ray, pytest.mark.slow]

WRITER_NODE = {
    # What cluster.yaml's writer type declares, scaled down: no CPU for prepare tasks, only writer memory.
    "resources": {"CPU": 0, "result_mb": 1024, "object_store_memory": 200_000_000},
    "node_config": {},
    "min_workers": 0,
    "max_workers": 1,
}


def fake_cluster_config(gcs_address: str, head_cpus: int) -> dict[str, Any]:
    """An autoscaler config for the fake multinode provider (what example.yaml would hold)."""
    commands: dict[str, list[str]] = {
        key: []
        for key in (
            "initialization_commands", "setup_commands", "head_setup_commands", "worker_setup_commands",
            "head_start_ray_commands", "worker_start_ray_commands", "cluster_synced_files",
            "rsync_exclude", "rsync_filter",
        )
    }  # fmt: skip
    return {
        "cluster_name": "raybatch-fake",
        "max_workers": 1,
        "upscaling_speed": 1.0,
        "idle_timeout_minutes": 0.05,  # 3 s
        "provider": {
            "type": "fake_multinode",
            "gcs_address": gcs_address,  # the provider assumes port 6379 otherwise
            "use_node_id_as_ip": True,
            "disable_node_updaters": True,
            "disable_launch_config_check": True,
        },
        "available_node_types": {
            "ray.head.default": {"resources": {"CPU": head_cpus}, "node_config": {}, "max_workers": 0},
            "ray.worker.writer": WRITER_NODE,
        },
        "head_node_type": "ray.head.default",
        "auth": {},
        "docker": {},
        "file_mounts": {},
        "file_mounts_sync_continuously": False,
        **commands,
    }


@pytest.fixture
def autoscaling_head(tmp_path: Path) -> Any:
    config = tmp_path / "autoscaler.json"
    head = RayHead(
        num_cpus=2,
        autoscaling_config=config,
        env={"RAY_FAKE_CLUSTER": "1", "AUTOSCALER_UPDATE_INTERVAL_S": "1"},
    )
    config.write_text(json.dumps(fake_cluster_config(head.address, head.num_cpus)))
    with head:
        yield head


def test_writer_demand_adds_a_writer_node_that_goes_away_when_idle(
    autoscaling_head: RayHead, digital_corpus: Corpus, tmp_path: Path
) -> None:
    url = autoscaling_head.dashboard_url
    assert [n.resources_total.get("result_mb") for n in list_nodes(address=url, detail=True)] == [None]

    env = ray_env({"RAY_ADDRESS": autoscaling_head.address, **JOB_ENV})
    command = [str(VENV_BIN / "python"), "jobs/process.py", *job_args(digital_corpus, tmp_path)]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
    assert evaluate_run(state, digital_corpus.truth)["boundary_f1"] == 1.0
    nodes = list_nodes(address=url, detail=True)
    writer_nodes = {n.node_id for n in nodes if "result_mb" in n.resources_total}
    assert len(writer_nodes) == 1, "no writer node was added"
    writers = [a for a in list_actors(address=url, detail=True) if a.class_name == "WriterActor"]
    # The writers placed ran on the new node (one the run no longer needed may never have been placed).
    placed = {a.node_id for a in writers if a.node_id}
    assert placed == writer_nodes, [(a.node_id, a.state) for a in writers]
    _wait_until_dead(url, writer_nodes.pop(), timeout=90)


def _wait_until_dead(url: str, node_id: str, timeout: float) -> None:
    def dead() -> bool:
        return {n.node_id: n.state for n in list_nodes(address=url, detail=True)}.get(node_id) == "DEAD"

    wait_for(dead, timeout, "the idle writer node to be removed", 1.0)
