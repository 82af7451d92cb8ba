"""Every metric raybatch reports is one of ``METRICS``, and each tag takes only the values declared for
it: no run id, holder name or file name becomes a Prometheus series."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from raybatch.cost import prices_for
from raybatch.metrics import METRICS, Metrics
from raybatch.models import JobStatus, Priority, ProcessingMode, Usage
from raybatch.settings import DEFAULT_MODEL, WorkloadSettings
from raybatch.state.workload import WorkloadLease
from raybatch.workload import Budget


class Recorded:
    """A stand-in for ``ray.util.metrics``: each metric made, and every (name, tags) reported."""

    def __init__(self) -> None:
        self.made: dict[str, tuple[str, ...]] = {}
        self.reported: list[tuple[str, dict[str, str]]] = []
        self.values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}  # a gauge's last value
        sink = self

        class Metric:
            def __init__(self, name: str, description: str = "", tag_keys: tuple[str, ...] = ()) -> None:
                self.name = name
                sink.made[name] = tag_keys

            def inc(self, value: float = 1.0, tags: dict[str, str] | None = None) -> None:
                sink.reported.append((self.name, dict(tags or {})))
                sink.values[self.name, tuple(sorted((tags or {}).items()))] = value

            set = inc

        self.Counter = self.Gauge = Metric


def _lease(holder: str, units: int, elastic: bool) -> WorkloadLease:
    now = datetime.now(UTC)
    return WorkloadLease(f"{holder}-1", holder, units, elastic, now, now + timedelta(minutes=5))


class _Leases:
    """A workload store that only lists leases: the budget reports what it reads."""

    def __init__(self, leases: Iterable[WorkloadLease]) -> None:
        self._leases = list(leases)

    def live_leases(self) -> list[WorkloadLease]:
        return self._leases


def _report_everything(metrics: Metrics) -> None:
    """Every reporting method, with every value its tags can come from."""
    prices = prices_for(DEFAULT_MODEL, None)
    metrics.pages_prepared(8, 3)
    for mode in ProcessingMode:
        metrics.tokens(Usage(100, 20, 5, 7), mode=mode, prices=prices)
    metrics.batch_created(10, 2_000_000)
    metrics.sync_sent(2)
    metrics.batch_ended()
    metrics.batches_in_flight(1)
    metrics.answer_unparseable()
    metrics.writer_mb_in_flight(12.5)
    for priority in Priority:
        metrics.documents_written(3, priority)
        for status in JobStatus:
            metrics.job_finished(status, priority)
    # Three runs (each a new holder name) and two other holders share the budget.
    leases = [_lease(f"run-{n:08x}", 2, True) for n in range(3)] + [_lease("export", 3, False)]
    leases.append(_lease("search-by-someone", 1, False))
    budget = Budget(None, WorkloadSettings(), holder="run-x", prepare_ceiling=8, metrics=metrics)
    budget._store = _Leases(leases)  # type: ignore[assignment]  # read-only: keep() is not called
    budget._leases = tuple(leases)
    budget._report()
    budget.register_cap()
    budget.prepare_cap()


def test_every_metric_is_declared_with_its_tags() -> None:
    sink = Recorded()
    _report_everything(Metrics(sink))
    assert sink.made == {spec.name: tuple(spec.tags) for spec in METRICS.values()}
    assert {name for name, _ in sink.reported} == set(sink.made)  # every metric was reported


def test_every_tag_takes_only_its_declared_values() -> None:
    sink = Recorded()
    _report_everything(Metrics(sink))
    by_name = {spec.name: spec for spec in METRICS.values()}
    for name, tags in sink.reported:
        spec = by_name[name]
        assert set(tags) == set(spec.tags), (name, tags)
        for key, value in tags.items():
            assert value in spec.tags[key], f"{name}{{{key}={value!r}}} is not a declared value"


def test_workload_units_are_by_kind_of_holder_not_by_holder() -> None:
    sink = Recorded()
    _report_everything(Metrics(sink))
    units = [tags for name, tags in sink.reported if name == "raybatch_workload_units"]
    assert units and {tags["kind"] for tags in units} == {"run", "hold"}
    held = {kind: sink.values["raybatch_workload_units", (("kind", kind),)] for kind in ("run", "hold")}
    assert held == {"run": 6, "hold": 4}  # three runs of 2 units; an export of 3 and a search of 1


def test_every_tag_has_a_finite_list_of_values() -> None:
    for spec in METRICS.values():
        for key, values in spec.tags.items():
            assert isinstance(values, tuple) and values and all(isinstance(v, str) for v in values), key


def test_prometheus_names() -> None:
    assert METRICS["pages_prepared"].prometheus == "ray_raybatch_pages_prepared_total"
    assert METRICS["batches_in_flight"].prometheus == "ray_raybatch_batches_in_flight"


def test_a_metrics_object_travels_without_its_sink() -> None:
    import pickle

    copy: Any = pickle.loads(pickle.dumps(Metrics(Recorded())))
    assert copy._sink is None and copy._made is None
