"""Ray metrics for the dashboard (Prometheus names ``ray_raybatch_*``); no-ops outside a Ray worker.

Pages prepared, requests and batches, MB in flight in the writers, tokens and estimated cost, jobs
ended and documents written by priority (urgent or normal), and the workload budget: its capacity,
the units runs and other holders have, the concurrency a run chose.

``METRICS`` declares each one with every value each of its tags may take: a tag never carries an
id, a name or a run (each new value is a new Prometheus series, kept for good), so the series are
bounded. ``deploy/grafana/raybatch.json`` charts them; a test holds both to this table.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from raybatch.cost import ModelPrices, cost_usd
from raybatch.models import JobStatus, Priority, ProcessingMode, Usage
from raybatch.units import MB

log = logging.getLogger(__name__)

TOKEN_KINDS = ("input", "output", "cache_read", "cache_creation")
HOLDER_KINDS = ("run", "hold")  # a run (an elastic holder), or other work (`raybatch workload hold`)
WORKLOAD_STAGES = ("register", "prepare")


@dataclass(frozen=True)
class MetricSpec:
    """One metric: its Ray name, what it measures, and each tag with every value it may take."""

    name: str
    description: str
    counter: bool = True  # else a gauge
    tags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def prometheus(self) -> str:
        """The name Prometheus shows: Ray's ``ray_`` prefix, and ``_total`` on a counter."""
        return f"ray_{self.name}{'_total' if self.counter else ''}"


_MODES = tuple(ProcessingMode)
_PRIORITIES = tuple(Priority)
METRICS: dict[str, MetricSpec] = {
    spec.name.removeprefix("raybatch_"): spec
    for spec in (
        MetricSpec("raybatch_pages_prepared", "pages rendered and read"),
        MetricSpec("raybatch_pages_ocr", "pages read by an OCR engine"),
        MetricSpec("raybatch_requests_submitted", "Claude requests sent", tags={"mode": _MODES}),
        MetricSpec("raybatch_batches_created", "Message Batches created"),
        MetricSpec("raybatch_batches_ended", "Message Batches filed"),
        MetricSpec("raybatch_batches_in_flight", "batches not yet filed", counter=False),
        MetricSpec("raybatch_request_megabytes", "MB of requests sent"),
        MetricSpec("raybatch_answers_unparseable", "answers retried"),
        MetricSpec("raybatch_tokens", "tokens used", tags={"kind": TOKEN_KINDS}),
        MetricSpec("raybatch_cost_usd", "estimated cost in US dollars"),
        MetricSpec("raybatch_writer_mb_in_flight", "source MB held by the result writers", counter=False),
        MetricSpec("raybatch_documents_written", "documents written", tags={"priority": _PRIORITIES}),
        MetricSpec(
            "raybatch_jobs_finished", "jobs ended", tags={"status": tuple(JobStatus), "priority": _PRIORITIES}
        ),
        MetricSpec("raybatch_workload_capacity", "units in the workload budget", counter=False),
        MetricSpec(
            "raybatch_workload_units", "workload units held", counter=False, tags={"kind": HOLDER_KINDS}
        ),
        MetricSpec(
            "raybatch_workload_concurrency",
            "concurrency a run chose",
            counter=False,
            tags={"stage": WORKLOAD_STAGES},
        ),
    )
}


def _ray_metrics() -> Any:
    """ray.util.metrics when this process is connected to Ray, else None."""
    try:
        import ray

        if not ray.is_initialized():
            return None
        from ray.util import metrics
    except ImportError:  # pragma: no cover - ray is a dependency
        return None
    return metrics


class Metrics:
    """The counters and gauges raybatch reports; created lazily in the process that reports, in
    ``ray.util.metrics`` (or ``sink``: anything with its ``Counter`` and ``Gauge``)."""

    def __init__(self, sink: Any = None) -> None:
        self._sink = sink
        self._made: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"_made": None, "_sink": None}  # metric objects stay in the process that made them

    def _get(self, name: str) -> Any:
        if self._made is None:
            metrics = self._sink or _ray_metrics()
            if metrics is None:
                return None
            self._made = _make(metrics)
        return self._made.get(name)

    def pages_prepared(self, pages: int, ocr_pages: int = 0) -> None:
        self._inc("pages_prepared", pages)
        self._inc("pages_ocr", ocr_pages)

    def batch_created(self, requests: int, request_bytes: int) -> None:
        self._inc("requests_submitted", requests, {"mode": ProcessingMode.BATCH.value})
        self._inc("batches_created", 1)
        self._inc("request_megabytes", request_bytes / MB)

    def sync_sent(self, requests: int) -> None:
        self._inc("requests_submitted", requests, {"mode": ProcessingMode.SYNC.value})

    def batch_ended(self) -> None:
        self._inc("batches_ended", 1)

    def batches_in_flight(self, count: int) -> None:
        self._set("batches_in_flight", count)

    def answer_unparseable(self) -> None:
        self._inc("answers_unparseable", 1)

    def tokens(self, usage: Usage, *, mode: ProcessingMode, prices: ModelPrices) -> None:
        """One answered request's tokens, and its cost at the price of the mode it was sent with."""
        for kind in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"):
            self._inc("tokens", getattr(usage, kind), {"kind": kind.removesuffix("_tokens")})
        self._inc("cost_usd", cost_usd({mode: usage}, prices))

    def writer_mb_in_flight(self, megabytes: float) -> None:
        self._set("writer_mb_in_flight", megabytes)

    def documents_written(self, count: int, priority: Priority = Priority.NORMAL) -> None:
        self._inc("documents_written", count, {"priority": priority.value})

    def job_finished(self, status: JobStatus, priority: Priority = Priority.NORMAL) -> None:
        self._inc("jobs_finished", 1, {"status": status.value, "priority": priority.value})

    def workload_units(self, capacity: int, units_by_kind: Mapping[str, float]) -> None:
        """The budget's capacity, and the units held by runs and by other work (``HOLDER_KINDS``)."""
        self._set("workload_capacity", capacity)
        for kind in HOLDER_KINDS:
            self._set("workload_units", units_by_kind.get(kind, 0), {"kind": kind})

    def workload_concurrency(self, stage: str, limit: int) -> None:
        self._set("workload_concurrency", limit, {"stage": stage})

    def _inc(self, name: str, value: float, tags: dict[str, str] | None = None) -> None:
        metric = self._get(name)
        if metric is not None and value:
            metric.inc(value, tags=tags)

    def _set(self, name: str, value: float, tags: dict[str, str] | None = None) -> None:
        metric = self._get(name)
        if metric is not None:
            metric.set(value, tags=tags)


def _make(metrics: Any) -> dict[str, Any]:
    made = {}
    for key, spec in METRICS.items():
        kind = metrics.Counter if spec.counter else metrics.Gauge
        made[key] = kind(spec.name, description=spec.description, tag_keys=tuple(spec.tags))
    return made
