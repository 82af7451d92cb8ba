"""deploy/grafana/raybatch.json charts the metrics raybatch reports, by the tags they carry, and
nothing else: a renamed metric or tag breaks this test, not a dashboard in production."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from raybatch.metrics import METRICS

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "raybatch.json"
BY_NAME = {spec.prometheus: spec for spec in METRICS.values()}
NAME = re.compile(r"\bray_raybatch_\w+")
GROUPED = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
MATCHED = re.compile(r"(\w+)\s*(?:=~|!~|!=|=)\s*\"")
LEGEND = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def _dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def _targets() -> list[tuple[str, dict[str, Any]]]:
    return [(panel["title"], target) for panel in _dashboard()["panels"] for target in panel["targets"]]


def _labels(expr: str, legend: str) -> set[str]:
    grouped = {
        label.strip() for group in GROUPED.findall(expr) for label in group.split(",") if label.strip()
    }
    inside = {label for selector in re.findall(r"\{([^}]*)\}", expr) for label in MATCHED.findall(selector)}
    return grouped | inside | set(LEGEND.findall(legend))


@pytest.mark.parametrize(("title", "target"), _targets(), ids=lambda v: v if isinstance(v, str) else "")
def test_each_query_uses_metrics_and_tags_that_exist(title: str, target: dict[str, Any]) -> None:
    expr, legend = target["expr"], target.get("legendFormat", "")
    names = set(NAME.findall(expr))
    assert names and names <= set(BY_NAME), f"{title}: unknown metric in {expr}"
    tags = {tag for name in names for tag in BY_NAME[name].tags}
    assert _labels(expr, legend) <= tags, f"{title}: a tag none of {sorted(names)} carries: {expr}"


def test_every_metric_has_a_chart() -> None:
    charted = {name for _, target in _targets() for name in NAME.findall(target["expr"])}
    assert charted == set(BY_NAME)


def test_every_tag_of_every_metric_is_bounded() -> None:
    for spec in METRICS.values():
        assert all(values for values in spec.tags.values()), spec.name
    assert "holder" not in {tag for spec in METRICS.values() for tag in spec.tags}  # a new value every run


def test_the_dashboard_is_importable() -> None:
    dashboard = _dashboard()
    assert dashboard["uid"] == "raybatch" and dashboard["schemaVersion"] >= 36
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    [source] = dashboard["templating"]["list"]
    assert (source["type"], source["query"]) == ("datasource", "prometheus")
    for panel in panels:  # every query goes to the chosen Prometheus, and refIds are unique per panel
        assert panel["datasource"]["uid"] == "${datasource}"
        assert len({t["refId"] for t in panel["targets"]}) == len(panel["targets"])


def test_the_label_parser_sees_a_wrong_tag() -> None:
    assert _labels('sum by (holder) (x{mode="batch"})', "{{stage}}") == {"holder", "mode", "stage"}
