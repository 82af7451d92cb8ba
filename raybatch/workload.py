"""The workload budget: one capacity of cost units for everything heavy on the same machines.

Heavy work takes units with a lease that ends unless renewed, so a crashed holder gives its units
back by itself; what others hold decides how hard a run may push:

    with workload.hold("export", cost=3):      # any heavy work: waits for room, renews, gives back
        export_registry()

A run holds units for its stages (``WORKLOAD_COST_*``) as an *elastic* holder and sizes its
concurrency from its share: its own units plus the free units, split among the runs in proportion
to their units, as a fraction of the capacity. The fraction scales each stage's ceiling, never below
its floor. Alone, a run gets its ceilings; two equal runs get half each; an export of 3 units beside
one run leaves it three quarters.
"""

from __future__ import annotations

import contextlib
import logging
import math
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from raybatch.errors import ConfigError, RaybatchError, WaitTimedOut
from raybatch.metrics import Metrics
from raybatch.retry import Backoff, retrying
from raybatch.settings import SecretUrl, Settings, StateSettings, WorkloadSettings, load_settings
from raybatch.state import WorkloadLease, WorkloadStore, open_workload

log = logging.getLogger(__name__)

__all__ = ["Budget", "Sizing", "concurrency", "hold", "open_budget", "run_command", "share", "snapshot"]

WAIT_POLL_SECONDS = 1.0  # how often a holder waiting for room asks again
WAIT_POLL = Backoff(initial=WAIT_POLL_SECONDS, factor=1.0, cap=WAIT_POLL_SECONDS)


def share(capacity: int, leases: Sequence[WorkloadLease], mine: str | None) -> float:
    """The fraction of ``capacity`` the elastic holder ``mine`` may use: its own units plus the free
    units in proportion to its part of all elastic units. 1.0 when the budget is off (capacity 0),
    0.0 while ``mine`` holds nothing (it waits for room)."""
    if capacity <= 0:
        return 1.0
    own = sum(lease.units for lease in leases if lease.lease_id == mine)
    if own == 0:
        return 0.0
    elastic = sum(lease.units for lease in leases if lease.elastic or lease.lease_id == mine)
    free = max(0, capacity - sum(lease.units for lease in leases))
    return min(1.0, (own + free * own / elastic) / capacity)


def concurrency(fraction: float, floor: int, ceiling: int) -> int:
    """``ceiling`` scaled by ``fraction`` (rounded down, so shares never add up past the ceiling),
    and never below ``floor``."""
    ceiling = max(floor, ceiling)
    return max(floor, min(ceiling, math.floor(ceiling * fraction + 1e-9)))


@dataclass(frozen=True)
class Sizing:
    """A concurrency a run chose: for which stage, from which share, among how many holders."""

    stage: str
    limit: int
    share: float
    holders: int


class Budget:
    """One run's place in the budget: its elastic lease and the concurrency it derives from it.

    ``keep`` takes the lease (or waits for room: until then the run works at its floors), renews it
    for ``ttl_seconds`` (WORKLOAD_TTL_SECONDS unless given) and re-reads the leases; ``open_budget``
    calls it every WORKLOAD_REFRESH_SECONDS. The caps are read from the last view, without touching
    the database.
    """

    def __init__(
        self,
        store: WorkloadStore | None,
        settings: WorkloadSettings,
        *,
        holder: str,
        prepare_ceiling: int | Callable[[], int],
        ttl_seconds: float | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._store, self._settings, self.holder = store, settings, holder
        self.ttl_seconds = ttl_seconds or settings.workload_ttl_seconds
        self._ceiling = prepare_ceiling if callable(prepare_ceiling) else (lambda: prepare_ceiling)
        self._metrics = metrics or Metrics()
        self._lease_id = f"{holder}-{uuid.uuid4().hex[:12]}"
        self._units = min(
            settings.workload_capacity,
            settings.workload_cost_register + settings.workload_cost_prepare + settings.workload_cost_write,
        )
        self._lease: WorkloadLease | None = None
        self._leases: tuple[WorkloadLease, ...] = ()
        self._lock = threading.Lock()
        self.sizings: list[Sizing] = []

    @property
    def off(self) -> bool:
        """True when there is no budget to share (capacity 0) or the run costs nothing."""
        return self._store is None or self._units <= 0

    @property
    def held(self) -> WorkloadLease | None:
        """The run's lease, None while it waits for room."""
        return self._lease

    def keep(self) -> None:
        """Take or renew the run's lease, then re-read every lease."""
        if self._store is None or self.off:
            return
        ttl = self.ttl_seconds
        lease = self._store.renew_units(self._lease_id, ttl) if self._lease is not None else None
        if lease is None:
            if self._lease is not None:
                log.warning("workload lease of %s expired before its renewal; taking it again", self.holder)
            lease = self._take()
        self._lease = lease
        self._leases = tuple(self._store.live_leases())
        with self._lock:
            self._report()

    def finish_registration(self) -> None:
        """Give back the registration's units; the run keeps those of preparation and writing."""
        self._units = min(
            self._units, self._settings.workload_cost_prepare + self._settings.workload_cost_write
        )
        if self._store is None or self._lease is None:
            return
        if self._units > 0:
            self._lease = self._store.renew_units(self._lease_id, self.ttl_seconds, units=self._units)
        else:
            self.give_back()

    def share(self) -> float:
        """The fraction of the budget this run may use now."""
        if self.off:
            return 1.0
        lease_id = self._lease_id if self._lease is not None else None
        return share(self._settings.workload_capacity, self._leases, lease_id)

    def register_cap(self) -> int:
        """Registration reads in flight."""
        limits = self._settings.workload_register_min, self._settings.workload_register_max
        return self._sized("register", *limits)

    def prepare_cap(self) -> int:
        """Prepare tasks in flight: a share of WORKLOAD_PREPARE_MAX, or of the cluster's own cap."""
        ceiling = self._settings.workload_prepare_max or self._ceiling()
        return self._sized("prepare", self._settings.workload_prepare_min, ceiling)

    def give_back(self) -> None:
        """Free the run's units (idempotent)."""
        if self._store is not None:
            self._store.give_back_units(self._lease_id)
        self._lease = None

    def _take(self) -> WorkloadLease | None:
        assert self._store is not None
        return self._store.take_units(
            lease_id=self._lease_id,
            holder=self.holder,
            units=self._units,
            capacity=self._settings.workload_capacity,
            ttl_seconds=self.ttl_seconds,
            elastic=True,
        )

    def _sized(self, stage: str, floor: int, ceiling: int) -> int:
        fraction = self.share()
        limit = concurrency(fraction, floor, ceiling)
        sizing = Sizing(stage, limit, round(fraction, 3), len(self._leases))
        with self._lock:
            last = next((s for s in reversed(self.sizings) if s.stage == stage), None)
            if last != sizing:
                self.sizings.append(sizing)
                self._metrics.workload_concurrency(stage, limit)
                self._report()
        return limit

    def _report(self) -> None:
        # By kind of holder, never by holder: a run's holder name is new every run.
        units: dict[str, float] = {}
        for lease in self._leases:
            kind = "run" if lease.elastic else "hold"
            units[kind] = units.get(kind, 0) + lease.units
        self._metrics.workload_units(self._settings.workload_capacity, units)


@contextlib.contextmanager
def open_budget(
    settings: Settings,
    holder: str,
    *,
    prepare_ceiling: int | Callable[[], int],
    metrics: Metrics | None = None,
) -> Iterator[Budget]:
    """A run's budget: taken (or waited for) now, kept in a background thread, given back at exit."""
    section = settings.section(WorkloadSettings)
    store = open_workload(settings.section(StateSettings)) if section.workload_capacity else None
    # A run renews often, so its lease can be short: a killed driver's units come back when its
    # jobs do (LEASE_SECONDS), not a whole WORKLOAD_TTL_SECONDS later.
    ttl = min(section.workload_ttl_seconds, max(settings.lease_seconds, 3 * section.workload_refresh_seconds))
    budget = Budget(
        store, section, holder=holder, prepare_ceiling=prepare_ceiling, ttl_seconds=ttl, metrics=metrics
    )
    try:
        budget.keep()
        if not budget.off and budget.held is None:
            log.warning("the workload budget is full: %s works at its floors until there is room", holder)
        with _Keeper(budget.keep, section.workload_refresh_seconds, holder):
            yield budget
    finally:
        try:
            budget.give_back()
        finally:
            if store is not None:
                store.close()


@contextlib.contextmanager
def hold(
    name: str,
    cost: int,
    *,
    settings: Settings | None = None,
    database_url: str | None = None,
    ttl: float | None = None,
    timeout: float | None = None,
    on_wait: Callable[[str], None] = log.info,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> Iterator[WorkloadLease | None]:
    """Hold ``cost`` units as ``name`` while the block runs: wait until they fit (at most ``timeout``
    seconds, then WaitTimedOut), renew the lease every third of its ``ttl``, give it back at exit.
    Yields the lease; None when the budget is off (WORKLOAD_CAPACITY=0)."""
    settings = settings or load_settings(database_url=database_url)
    if database_url is not None:
        settings = settings.model_copy(update={"database_url": SecretUrl(database_url)})
    capacity = settings.workload_capacity
    if not capacity:
        yield None
        return
    if not 1 <= cost <= capacity:
        raise ConfigError(f"a workload cost is between 1 and WORKLOAD_CAPACITY ({capacity}), not {cost}")
    ttl = ttl or settings.workload_ttl_seconds
    store = open_workload(settings.section(StateSettings))
    lease_id = f"{name}-{uuid.uuid4().hex[:12]}"

    def take() -> WorkloadLease | None:
        return store.take_units(
            lease_id=lease_id, holder=name, units=cost, capacity=capacity, ttl_seconds=ttl
        )

    def renew() -> None:
        if store.renew_units(lease_id, ttl) is None and take() is None:
            log.warning("workload lease of %s expired and there is no room to take it again", name)

    try:
        lease = _wait_for(take, name, cost, timeout, on_wait, sleep, monotonic)
        try:
            with _Keeper(renew, ttl / 3, name):
                yield lease
        finally:
            store.give_back_units(lease_id)
    finally:
        store.close()


def snapshot(settings: Settings) -> dict[str, Any]:
    """The budget as it stands: capacity, units in use and free, and every live lease."""
    store = open_workload(settings.section(StateSettings))
    try:
        leases = store.live_leases()
    finally:
        store.close()
    in_use = sum(lease.units for lease in leases)
    return {
        "capacity": settings.workload_capacity,
        "in_use": in_use,
        "free": max(0, settings.workload_capacity - in_use),
        "holders": [
            {
                "holder": lease.holder,
                "lease": lease.lease_id,
                "units": lease.units,
                "elastic": lease.elastic,
                "taken_at": lease.taken_at.isoformat(),
                "expires_at": lease.expires_at.isoformat(),
            }
            for lease in leases
        ],
    }


def run_command(
    name: str,
    cost: int,
    command: Sequence[str],
    *,
    settings: Settings,
    ttl: float | None = None,
    timeout: float | None = None,
    on_wait: Callable[[str], None] = log.info,
) -> int:
    """Run ``command`` while holding ``cost`` units as ``name``; its exit code."""
    if not command:
        raise ConfigError("no command to run under the workload lease")
    with hold(name, cost, settings=settings, ttl=ttl, timeout=timeout, on_wait=on_wait):
        return subprocess.run(list(command), check=False).returncode


def _wait_for(
    take: Callable[[], WorkloadLease | None],
    name: str,
    cost: int,
    timeout: float | None,
    on_wait: Callable[[str], None],
    sleep: Callable[[float], None],
    monotonic: Callable[[], float],
) -> WorkloadLease:
    """Take the lease, asking again every WAIT_POLL_SECONDS while the budget is full."""
    said = False

    def once() -> WorkloadLease:
        nonlocal said
        lease = take()
        if lease is None:
            if not said:
                on_wait(f"{name} waits for {cost} workload units")
                said = True
            raise _NoRoom(name)
        return lease

    try:
        return retrying(
            once,
            backoff=WAIT_POLL,
            budget=timeout,
            to_the_end=True,
            retry_on=_NoRoom,
            sleep=sleep,
            monotonic=monotonic,
        )
    except _NoRoom:
        raise WaitTimedOut(f"{name} found no room for {cost} workload units within {timeout:g} s") from None


class _NoRoom(Exception):
    """The workload budget is full for now."""


class _Keeper:
    """Calls ``action`` every ``interval`` seconds in a daemon thread until the block ends."""

    def __init__(self, action: Callable[[], None], interval: float, name: str) -> None:
        self._action, self._interval = action, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"workload-{name}", daemon=True)

    def __enter__(self) -> None:
        self._thread.start()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._action()
            except RaybatchError as exc:  # the database may be back on the next round
                log.warning("workload lease not renewed: %s", exc)
