"""deploy/kuberay/ against what the code uses: the writers' resource and the settings by the names raybatch
reads, secrets only from the Kubernetes Secret, a head that takes no work, and the CLI's own entrypoint."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import ray
import yaml

from raybatch.cli import _parser
from raybatch.settings import Settings, WriterSettings, secret_env_names
from raybatch.settings_sources import env_name

SETTING_OF = {env_name(name): name for name in Settings.model_fields}  # RAYBATCH_STORE -> store

REPO = Path(__file__).resolve().parents[2]
KUBERAY = REPO / "deploy" / "kuberay"
WRITER_RESOURCE = WriterSettings().result_resource  # what the writers reserve


def _load(name: str) -> dict[str, Any]:
    return yaml.safe_load((KUBERAY / name).read_text(encoding="utf-8"))


def _cluster_specs() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("raycluster", _load("raycluster.yaml")["spec"]),
        ("rayjob", _load("rayjob.yaml")["spec"]["rayClusterSpec"]),
    ]


def _groups(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {"head": spec["headGroupSpec"], **{g["groupName"]: g for g in spec["workerGroupSpecs"]}}


def _containers(group: dict[str, Any]) -> list[dict[str, Any]]:
    return group["template"]["spec"]["containers"]


def _env(group: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") for c in _containers(group) for e in c.get("env", [])}


def _ray_resources(group: dict[str, Any]) -> dict[str, float]:
    """rayStartParams' resources: JSON inside the quotes KubeRay hands to `ray start`."""
    text = group["rayStartParams"].get("resources")
    return json.loads(json.loads(text)) if text else {}


SPECS = pytest.mark.parametrize(
    ("kind", "spec"), _cluster_specs(), ids=lambda v: v if isinstance(v, str) else ""
)


def test_the_rayjob_runs_on_the_standing_clusters_spec() -> None:
    assert _load("rayjob.yaml")["spec"]["rayClusterSpec"] == _load("raycluster.yaml")["spec"]


@SPECS
def test_the_head_takes_no_work(kind: str, spec: dict[str, Any]) -> None:
    head = spec["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0"
    assert WRITER_RESOURCE not in _ray_resources(head)


@SPECS
def test_writer_pods_declare_the_writers_resource_and_no_cpu(kind: str, spec: dict[str, Any]) -> None:
    groups = _groups(spec)
    writers = {name: g for name, g in groups.items() if WRITER_RESOURCE in _ray_resources(g)}
    assert list(writers) == ["writer"]
    assert writers["writer"]["rayStartParams"]["num-cpus"] == "0"  # prepare tasks stay off them
    node_mb = _ray_resources(writers["writer"])[WRITER_RESOURCE]
    settings = Settings.model_validate({SETTING_OF[k]: v for k, v in _env(groups["head"]).items()})
    assert settings.max_concurrent_mb / settings.result_workers <= node_mb  # every writer fits a pod
    assert settings.max_concurrent_mb <= node_mb * writers["writer"]["maxReplicas"]
    assert "num-cpus" not in groups["prepare"]["rayStartParams"]  # prepare pods do the CPU work


@SPECS
def test_settings_are_names_raybatch_reads(kind: str, spec: dict[str, Any]) -> None:
    for name, group in _groups(spec).items():
        assert set(_env(group)) <= set(SETTING_OF), name


@SPECS
def test_secrets_come_only_from_the_secret_and_only_to_the_head(kind: str, spec: dict[str, Any]) -> None:
    for name, group in _groups(spec).items():
        env = _env(group)
        assert not secret_env_names(env), f"{name}: a secret written inline"
        sources = [s for c in _containers(group) for s in c.get("envFrom", [])]
        if name == "head":
            assert sources == [{"secretRef": {"name": "raybatch-secrets"}}]
        else:
            assert not sources, f"{name}: workers get their settings from the driver, not the Secret"
    text = (KUBERAY / f"{kind}.yaml").read_text()
    assert "kind: Secret" not in text and "stringData" not in text


@SPECS
def test_every_pod_runs_the_image_as_its_non_root_user(kind: str, spec: dict[str, Any]) -> None:
    images = set()
    for group in _groups(spec).values():
        pod = group["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 1000
        images |= {c["image"] for c in _containers(group)}
    assert len(images) == 1  # one image, the Dockerfile's
    assert spec["rayVersion"] == ray.__version__
    assert spec["enableInTreeAutoscaling"] is True


def test_the_rayjob_runs_the_clis_own_command() -> None:
    job = _load("rayjob.yaml")["spec"]
    words = shlex.split(job["entrypoint"])
    assert words[0] == "raybatch"
    args = _parser().parse_args(words[1:])
    assert args.command == "run" and args.source.startswith("s3://")
    knobs = yaml.safe_load(job["runtimeEnvYAML"])["env_vars"]
    assert set(knobs) <= set(SETTING_OF) and not secret_env_names(knobs)


def test_the_runtime_env_example_holds_settings_and_no_secret() -> None:
    runtime_env = yaml.safe_load((REPO / "deploy" / "runtime_env.yaml").read_text())
    assert set(runtime_env) <= {"working_dir", "env_vars"}
    knobs = runtime_env["env_vars"]
    assert knobs and set(knobs) <= set(SETTING_OF)
    assert not secret_env_names(knobs)
    Settings.model_validate({SETTING_OF[k]: v for k, v in knobs.items()})  # valid values


def test_the_secret_check_catches_an_inline_secret() -> None:
    spec = _load("raycluster.yaml")["spec"]
    spec["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "RAYBATCH_S3_SECRET_KEY", "value": "inline"}
    ]
    assert secret_env_names(_env(spec["workerGroupSpecs"][1])) == ["RAYBATCH_S3_SECRET_KEY"]
