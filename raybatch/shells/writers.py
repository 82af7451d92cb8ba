"""The result writers as Ray actors. This module imports only what writing needs (no Claude SDK,
no OCR engine): each writer process stays small while it waits for its first job."""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any

import ray

from raybatch.collector import settle
from raybatch.errors import ConfigError
from raybatch.metrics import Metrics
from raybatch.models import Lease
from raybatch.objects import open_store
from raybatch.outage import patient_state, patient_store
from raybatch.settings import Settings, WriterActorSettings, WriterSettings
from raybatch.state import open_state
from raybatch.work.writer import ResultWriter, WriteReport


class WriterActor:
    """A ResultWriter as a Ray actor holding its share of the writers' memory resource."""

    def __init__(self, settings: WriterActorSettings) -> None:
        without_pandas()
        # A restart of the database or the store is waited out, call by call, within its budget.
        self._writer = ResultWriter(
            patient_state(open_state(settings.state), settings.state.database_outage_budget),
            patient_store(open_store(settings.store), settings.store.store_outage_budget),
            sources=settings.store,
            prepare=settings.prepare,
            claude=settings.request,
            review=settings.review,
            lease_seconds=settings.state.lease_seconds,
            metrics=Metrics(),
            outputs=settings.outputs,
        )
        settle()

    def write(self, lease: Lease) -> WriteReport:
        return self._writer.write(lease)

    def write_group(self, leases: list[Lease]) -> list[WriteReport]:
        """Several small jobs in one call, one table file for them (see ``WriterPool``)."""
        return self._writer.write_group(leases)


def without_pandas() -> None:
    """This process goes on as if pandas were not installed, unless it is imported already. pyarrow
    imports pandas, when it can, on the first table it builds (to ask whether it was handed a pandas
    object): about 0.3 s of CPU and 40 MB in every writer. A writer never hands it one."""
    if "pandas" not in sys.modules and not any(isinstance(f, _NoPandas) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())


class _NoPandas(importlib.abc.MetaPathFinder):
    """Finds pandas nowhere: importing it fails as when it is not installed."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {fullname!r} (left out of raybatch's writers)")
        return None


def start_writers(settings: Settings, run_id: str) -> list[Any]:
    """RESULT_WORKERS writer actors (see ``start_writer``)."""
    return [start_writer(settings, run_id, i) for i in range(settings.section(WriterSettings).result_workers)]


def start_writer(settings: Settings, run_id: str, index: int) -> Any:
    """Writer actor ``index`` of a run, reserving MAX_CONCURRENT_MB / RESULT_WORKERS of the resource."""
    writers = settings.section(WriterSettings)
    share = writers.max_concurrent_mb / writers.result_workers
    if share <= 0:
        raise ConfigError("MAX_CONCURRENT_MB must leave each writer a share")
    actor = ray.remote(WriterActor).options(
        name=f"ResultWriter-{index}-{run_id}",
        resources={writers.result_resource: share},
        num_cpus=0,
        max_restarts=-1,
        max_task_retries=0,
    )
    return actor.remote(settings.for_writers())
