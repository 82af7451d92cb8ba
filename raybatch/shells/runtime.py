"""The Ray side: joining or starting Ray, and the coordinator actor (the writer actors are in
``raybatch.shells.writers`` and the registration and prepare tasks in ``raybatch.shells.tasks``, so those
workers never import the Claude SDK).

Everything here is a thin shell around plain classes (``BatchCoordinator``, ``ResultWriter``) so the
logic is tested without Ray and the shells stay readable in the dashboard.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
from typing import Any

import ray

from raybatch.collector import settle
from raybatch.coordinator.identity import code_version, coordinator_identity
from raybatch.coordinator.spool import AnswerSpool
from raybatch.ids import OutputKeys
from raybatch.metrics import Metrics
from raybatch.models import ProcessingMode
from raybatch.objects import open_store
from raybatch.settings import (
    ClaudeSettings,
    CoordinatorActorSettings,
    Settings,
    StateSettings,
    WriterSettings,
    secret_env_names,
)
from raybatch.state import open_state

log = logging.getLogger(__name__)


def connect(settings: Settings, *, dashboard: bool = True) -> bool:
    """Join Ray (an initialised session, RAY_ADDRESS, or the cluster this machine is a node of) or
    start it locally. A joined cluster's worker output reaches this driver (``ray job logs``).

    Returns True when this call started a local Ray that the caller must shut down.
    """
    limit_oom_retries(settings)
    if ray.is_initialized():
        return False
    writers = settings.section(WriterSettings)
    # Workers may inherit the environment of a process that holds secrets (a local Ray's: this one;
    # a cluster's: the head's): blank them for this job's workers (each is sent what it needs as
    # arguments). A name the submitted job's own runtime env sets is left to it.
    hidden = {name: "" for name in secret_env_names(os.environ) if name not in _job_env_names()}
    address = settings.ray_address or os.environ.get("RAY_ADDRESS") or running_cluster()
    if address:
        ray.init(
            address=address,
            namespace=settings.ray_namespace,
            log_to_driver=True,
            runtime_env={"env_vars": hidden} if hidden else None,
        )
        _warn_without_writer_nodes(address, writers.result_resource)
        return False
    ray.init(
        address="local",
        namespace=settings.ray_namespace,
        resources={writers.result_resource: float(writers.max_concurrent_mb)},
        include_dashboard=dashboard,
        dashboard_host="127.0.0.1",
        log_to_driver=False,
        runtime_env={"env_vars": hidden} if hidden else None,
    )
    return True


def _warn_without_writer_nodes(address: str, resource: str) -> None:
    if resource not in ray.cluster_resources():
        log.warning(
            "no node of the cluster at %s declares %s yet: the writers wait until one does "
            "(a writer node the autoscaler adds, or `ray start --resources`)",
            address,
            resource,
        )


def running_cluster() -> str | None:
    """The address of the cluster `ray start` made this machine a node of, if it still runs.

    Ray's own record of it (``ray_current_cluster`` in its default temp dir, ``$RAY_TMPDIR/ray`` or
    ``/tmp/ray``, which `ray start` writes and `ray stop` removes) must name a GCS a raylet here still
    serves: a record left by a crashed node is ignored. A Ray started by ``ray.init()``, or by
    `ray start --temp-dir` elsewhere (a test's head), leaves no record there and is never joined.
    """
    from ray._private import services  # Ray's own discovery (pinned 2.60), as ray.init() does it

    address = services.find_bootstrap_address(None)
    if address and address in services.find_gcs_addresses():
        return str(address)
    if address:
        log.info("Ray's record names %s, which no raylet here serves: starting a local Ray", address)
    return None


def _job_env_names() -> set[str]:
    """The variables a submitted job's runtime env sets (``ray job submit --runtime-env-json``)."""
    try:
        job = json.loads(os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR", "{}"))
        return set((job.get("runtime_env") or {}).get("env_vars") or {})
    except (ValueError, AttributeError):
        return set()


def limit_oom_retries(settings: Settings) -> None:
    """Bound Ray's retries of OOM-killed tasks (unbounded by default); call before ``ray.init``."""
    # Attempts are also counted in the DB, so a page bomb ends as a failed job, not a loop.
    os.environ.setdefault("RAY_task_oom_retries", str(max(0, settings.prepare_max_attempts - 1)))


class CoordinatorActor:
    """The BatchCoordinator as an async Ray actor: builds its ports inside the actor process.

    Detached, so it outlives the driver that created it and serves every driver on its database;
    it exits by itself once no driver called for COORDINATOR_IDLE_SECONDS and it holds no work.
    """

    def __init__(self, settings: CoordinatorActorSettings, database_id: str) -> None:
        # The Claude SDK loads here, in the actor, not in each driver that imports this module (a
        # driver never calls Claude: the SDK's import, 0.8 s of CPU, delayed every run's start).
        from raybatch.coordinator.coordinator import BatchCoordinator
        from raybatch.coordinator.submit import RESOLVE_SECONDS

        # Its one ray.get (``_get_refs``) runs on a thread, not on the event loop Ray warns for.
        os.environ["RAY_WARN_BLOCKING_GET_INSIDE_ASYNC"] = "0"
        state = open_state(settings.state)
        # The database's id comes from the driver: a coordinator restarted while the database is
        # away still knows where its spooled answers are.
        spool = AnswerSpool(open_store(settings.store), OutputKeys(database_id))
        self._coordinator = BatchCoordinator(
            settings.claude,
            state,
            resolve=functools.partial(_get_refs, timeout=RESOLVE_SECONDS),
            metrics=Metrics(),
            # The actor's id survives its restarts: a restarted coordinator keeps its lead and its calls.
            coordinator_id=ray.get_runtime_context().get_actor_id(),
            on_idle=ray.actor.exit_actor,
            spool=spool,
        )
        settle()

    async def offer_all(self, offers: list[tuple[int, dict[int, Any], ProcessingMode, int]]) -> None:
        """Jobs prepared in one driver step (see ``BatchCoordinator.offer``)."""
        for offer in offers:
            await self._coordinator.offer(*offer)

    async def forget(self, job_ids: list[int]) -> None:
        await self._coordinator.forget(job_ids)

    async def flush(self, flush: bool = True) -> None:
        await self._coordinator.flush(flush)

    async def snapshot(self, settled: int = -1, wait: float = 0.0) -> Any:
        return await self._coordinator.snapshot(settled, wait)

    async def stop(self) -> None:
        await self._coordinator.stop()


async def _get_refs(refs: list[Any], timeout: float) -> list[Any]:
    """A pass's payloads in one ``ray.get``, on a thread: the event loop goes on meanwhile (an
    ``await`` of each ref instead costs a loop wake-up and a future each, about 0.1 ms a job)."""
    return await asyncio.to_thread(ray.get, refs, timeout=timeout)


def coordinator_name(settings: Settings, database_id: str | None = None) -> str:
    """One coordinator per state database, Claude settings and raybatch code (``identity``)."""
    known = database_id or _database_id(settings.section(StateSettings))
    return f"BatchCoordinator-{coordinator_identity(settings.section(ClaudeSettings), known, code_version())}"


@functools.lru_cache(maxsize=8)
def _database_id(state: StateSettings) -> str:
    return open_state(state).database_id()


def get_coordinator(settings: Settings, database_id: str | None = None) -> Any:
    """The named coordinator for this database, settings and code, created (detached, from the
    coordinator's own settings sections) if it is not running."""
    known = database_id or _database_id(settings.section(StateSettings))
    actor = ray.remote(CoordinatorActor).options(
        name=coordinator_name(settings, known),
        namespace=settings.ray_namespace,
        lifetime="detached",
        get_if_exists=True,
        max_restarts=-1,
        max_task_retries=0,
        max_concurrency=64,
        num_cpus=0,
    )
    return actor.remote(settings.for_coordinator(), known)


def retire_coordinator(settings: Settings, database_id: str | None = None) -> None:
    """Stop this database's coordinator now (it was bound to a Claude endpoint that goes away)."""
    try:
        handle = ray.get_actor(coordinator_name(settings, database_id), namespace=settings.ray_namespace)
        ray.get(handle.stop.remote(), timeout=30)
        ray.kill(handle, no_restart=True)
    except (ValueError, ray.exceptions.RayError) as exc:  # not running, or already gone
        log.info("coordinator not retired: %s", type(exc).__name__)
