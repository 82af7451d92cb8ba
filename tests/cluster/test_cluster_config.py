"""cluster.yaml (AWS) and cluster.onprem.yaml (local provider) against Ray's own schema and checks, and
against what raybatch needs of a cluster: an idle head, prepare and writer node types, no secrets."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import ray
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

from raybatch.settings import Settings
from raybatch.settings_sources import env_name

SETTING_OF = {env_name(name): name for name in Settings.model_fields}  # RAYBATCH_STORE -> store

REPO = Path(__file__).resolve().parents[2]
SCHEMA = Path(ray.autoscaler.__file__).parent / "ray-schema.json"
SECRET_NAMES = (
    "ANTHROPIC_API_KEY",
    "S3_ACCESS_KEY",
    "S3_SECRET_KEY",
    "MINIO_ACCESS_KEY",
    "MINIO_SECRET_KEY",
    "DATABASE_URL",
)


def _load(name: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / name).read_text(encoding="utf-8"))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@pytest.mark.parametrize("name", ["cluster.yaml", "cluster.onprem.yaml"])
def test_config_passes_rays_schema_and_checks(name: str) -> None:
    config = _load(name)
    jsonschema.validate(config, json.loads(SCHEMA.read_text()))  # the file as written
    validate_config(prepare_config(copy.deepcopy(config)))  # as `ray up` and the autoscaler see it


def test_the_schema_check_can_fail() -> None:
    config = _load("cluster.yaml")
    config["available_node_types"]["writer"]["resources"]["result_mb"] = 0.5  # resources are integers
    with pytest.raises(jsonschema.ValidationError):
        validate_config(prepare_config(config))


@pytest.mark.parametrize("name", ["cluster.yaml", "cluster.onprem.yaml"])
def test_no_secret_is_written_in_the_config(name: str) -> None:
    config = _load(name)
    assigned = re.compile(rf"\b({'|'.join(SECRET_NAMES)})\s*=")
    assert not [s for s in _strings(config) if assigned.search(s)]
    head_start = " ".join(config["head_start_ray_commands"])
    assert "--dashboard-host=127.0.0.1" in head_start and "0.0.0.0" not in json.dumps(config)


def test_aws_node_types_split_the_work() -> None:
    config = _load("cluster.yaml")
    types = config["available_node_types"]
    assert types[config["head_node_type"]]["resources"] == {"CPU": 0}
    writers = {k: t for k, t in types.items() if t["resources"].get("result_mb", 0) > 0}
    prepare = {k: t for k, t in types.items() if k != config["head_node_type"] and k not in writers}
    assert list(writers) == ["writer"] and list(prepare) == ["prepare"]
    for node_type in (*writers.values(), *prepare.values()):
        assert 0 == node_type["min_workers"] < node_type["max_workers"]
        assert node_type["initialization_commands"] == []  # the secrets stay on the head
    assert writers["writer"]["resources"]["CPU"] == 0  # prepare tasks go to prepare nodes
    assert "secretsmanager get-secret-value" in " ".join(config["initialization_commands"])


def test_aws_settings_are_knobs_raybatch_reads_and_fit_the_writer_nodes() -> None:
    config = _load("cluster.yaml")
    env = dict(
        option.removeprefix("--env ").split("=", 1)
        for option in config["docker"]["head_run_options"]
        if option.startswith("--env ")
    )
    assert set(env) <= set(SETTING_OF)
    assert "RAYBATCH_PREPARE_IN_FLIGHT" not in env  # the default cap follows the cluster as it grows
    node_mb = config["available_node_types"]["writer"]["resources"]["result_mb"]
    share = int(env["RAYBATCH_MAX_CONCURRENT_MB"]) / int(env["RAYBATCH_RESULT_WORKERS"])
    assert share <= node_mb  # every writer fits on a writer node
    assert (
        int(env["RAYBATCH_MAX_CONCURRENT_MB"])
        <= node_mb * config["available_node_types"]["writer"]["max_workers"]
    )


def test_aws_image_and_install_match_this_package() -> None:
    config = _load("cluster.yaml")
    assert config["docker"]["image"] == f"rayproject/ray:{ray.__version__}-py311-cpu"
    version = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    assert version and f'"raybatch=={version.group(1)}"' in " ".join(config["setup_commands"])
    assert config["file_mounts"] == {"~/wheels": "./dist", "~/raybatch-constraints.txt": "./constraints.txt"}


@pytest.mark.parametrize("name", ["cluster.yaml", "cluster.onprem.yaml"])
def test_every_node_installs_the_locked_versions(name: str) -> None:
    config = _load(name)
    installs = [c for c in config["setup_commands"] if "pip install" in c]
    assert installs and all("-c ~/raybatch-constraints.txt" in c for c in installs)
    assert config["file_mounts"]["~/raybatch-constraints.txt"] == "./constraints.txt"
    pins = (REPO / "constraints.txt").read_text().splitlines()
    assert f"ray=={ray.__version__}" in pins  # the image's Ray, on every node


def test_onprem_head_is_idle_and_writers_declare_their_memory() -> None:
    config = _load("cluster.onprem.yaml")
    head = " ".join(config["head_start_ray_commands"])
    assert "--num-cpus=0" in head and ". /etc/raybatch/raybatch.env" in head
    assert "/etc/raybatch/ray-node-flags" in " ".join(config["worker_start_ray_commands"])
    assert "result_mb" in (REPO / "cluster.onprem.yaml").read_text()  # the documented writer flags
