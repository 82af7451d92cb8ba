"""Ray metrics for the dashboard (Prometheus names ``ray_raybatch_*``); no-ops outside a Ray worker.

Pages prepared, requests and batches, MB in flight in the writers, tokens and estimated cost, jobs
ended and documents written by priority (urgent or normal), and the workload budget: its capacity,
the units each holder has, the concurrency a run chose.
"""

from __future__ import annotations

import logging
from typing import Any

from raybatch.cost import ModelPrices, cost_usd
from raybatch.models import JobStatus, Priority, ProcessingMode, Usage
from raybatch.units import MB

log = logging.getLogger(__name__)


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
    """The counters and gauges raybatch reports; created lazily in the process that reports."""

    def __init__(self) -> None:
        self._made: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"_made": None}  # metric objects stay in the process that made them

    def _get(self, name: str) -> Any:
        if self._made is None:
            metrics = _ray_metrics()
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

    def workload_units(self, capacity: int, units_by_holder: dict[str, float]) -> None:
        self._set("workload_capacity", capacity)
        for holder, units in units_by_holder.items():
            self._set("workload_units", units, {"holder": holder})

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
    counter, gauge = metrics.Counter, metrics.Gauge
    return {
        "pages_prepared": counter("raybatch_pages_prepared", description="pages rendered and read"),
        "pages_ocr": counter("raybatch_pages_ocr", description="pages read by an OCR engine"),
        "requests_submitted": counter(
            "raybatch_requests_submitted", description="Claude requests sent", tag_keys=("mode",)
        ),
        "batches_created": counter("raybatch_batches_created", description="Message Batches created"),
        "batches_ended": counter("raybatch_batches_ended", description="Message Batches filed"),
        "batches_in_flight": gauge("raybatch_batches_in_flight", description="batches not yet filed"),
        "request_megabytes": counter("raybatch_request_megabytes", description="MB of requests sent"),
        "answers_unparseable": counter("raybatch_answers_unparseable", description="answers retried"),
        "tokens": counter("raybatch_tokens", description="tokens used", tag_keys=("kind",)),
        "cost_usd": counter("raybatch_cost_usd", description="estimated cost in US dollars"),
        "writer_mb_in_flight": gauge(
            "raybatch_writer_mb_in_flight", description="source MB held by the result writers"
        ),
        "documents_written": counter(
            "raybatch_documents_written", description="documents written", tag_keys=("priority",)
        ),
        "jobs_finished": counter(
            "raybatch_jobs_finished", description="jobs ended", tag_keys=("status", "priority")
        ),
        "workload_capacity": gauge("raybatch_workload_capacity", description="units in the workload budget"),
        "workload_units": gauge(
            "raybatch_workload_units", description="workload units held", tag_keys=("holder",)
        ),
        "workload_concurrency": gauge(
            "raybatch_workload_concurrency", description="concurrency a run chose", tag_keys=("stage",)
        ),
    }
