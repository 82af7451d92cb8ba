"""The spend caps: ``MAX_COST_USD`` per run and ``MAX_DAILY_COST_USD`` per UTC day across runs.

What counts is *committed* spend: the expected cost of requests in flight plus the actual cost of
requests answered, since the run started (or the day began). Before the coordinator sends anything,
``SpendGate.admit`` lets whole jobs go, oldest first, while the committed spend plus what they are
expected to cost stays within every cap that governs them; the others stay prepared (parked), and
the reason is stored where progress and ``status`` read it. Nothing paid for is lost: parked chunks
keep their payloads and answers already filed stay.

Caps are per run: a run with ``MAX_COST_USD`` stores its own cap and start (``spend.run.<id>``)
and takes the jobs it registers under it (``jobs.spend_run``); its spend is that of its jobs. Runs
beside it — an urgent ``submit``, a second run with or without a cap — neither remove that cap nor
reset that spend, and a run's cap holds back its own jobs only. The daily cap is set by a run that
gives one and never cleared by a run that does not. ``raybatch resume --max-cost-usd N`` raises
the caps of the runs going on (the coordinator reads them on every pass); a run's cap governs
nothing once it ended (the last ended one is kept for ``status``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Protocol

from raybatch.claude.records import PreparedRequest
from raybatch.cost import EXPECTED_OUTPUT_TOKENS_PER_PAGE, ModelPrices, cost_usd
from raybatch.models import ProcessingMode, Usage
from raybatch.state.base import utc_now
from raybatch.state.port import ChunkStates, Flags, JobStates

RUN_CAPS = "spend.run."  # + the run's id: {"max_usd": ..., "started": ...}
DAY_CAP = "spend.max_day_usd"
PARKED = "spend.parked"
_RETIRED = ("spend.max_run_usd", "spend.run_started")  # one global run cap, before caps were per run


class SpendState(JobStates, ChunkStates, Flags, Protocol):
    """The slices of the state store the spend gate reads (caps, the runs of jobs) and stamps
    (requests sent)."""


@dataclass(frozen=True)
class RunCap:
    """One run's cap, when the run started, and when it ended (an ended run's cap governs nothing;
    the last one is kept for ``status``)."""

    max_usd: float
    started: datetime
    ended: datetime | None = None


@dataclass(frozen=True)
class SpendCaps:
    """The caps in force: each capped run's (by run id) and the day's (None: no cap)."""

    day_usd: float | None
    runs: Mapping[str, RunCap] = field(default_factory=dict)

    @property
    def going(self) -> dict[str, RunCap]:
        """The caps of the runs going on: those that govern their jobs."""
        return {run_id: cap for run_id, cap in self.runs.items() if cap.ended is None}

    @property
    def latest(self) -> tuple[str, RunCap] | None:
        """The capped run started last, if any (what ``status`` shows as this run's)."""
        return max(self.runs.items(), key=lambda item: item[1].started, default=None)

    @property
    def run_usd(self) -> float | None:
        latest = self.latest
        return None if latest is None else latest[1].max_usd

    @property
    def run_started(self) -> datetime | None:
        latest = self.latest
        return None if latest is None else latest[1].started


def start_run(state: Flags, run_id: str, run_usd: float | None, day_usd: float | None) -> None:
    """A run begins: with ``run_usd``, its jobs' spend counts from now under that cap; a daily cap
    given is set. Other runs' caps, and a daily cap not given, stay as they are."""
    values: dict[str, str | None] = {PARKED: None, **dict.fromkeys(_RETIRED)}
    if run_usd is not None:
        values[RUN_CAPS + run_id] = _run_cap(RunCap(float(run_usd), utc_now()))
    if day_usd is not None:
        values[DAY_CAP] = _text(day_usd)
    state.set_flags(values)


def end_run(state: Flags, run_id: str) -> None:
    """A run ended: its cap governs nothing more (its jobs fall under the daily cap only); it is
    kept for ``status`` until another capped run ends."""
    caps = read_caps(state)
    values: dict[str, str | None] = {RUN_CAPS + other: None for other, cap in caps.runs.items() if cap.ended}
    if (cap := caps.runs.get(run_id)) is not None:
        values[RUN_CAPS + run_id] = _run_cap(replace(cap, ended=utc_now()))
    state.set_flags(values)


def raise_caps(state: Flags, run_usd: float | None, day_usd: float | None) -> None:
    """Set the caps given (``resume`` with a higher cap) on every run going on; a cap not given
    stays as it is."""
    values: dict[str, str | None] = {}
    if run_usd is not None:
        for run_id, cap in read_caps(state).going.items():
            values[RUN_CAPS + run_id] = _run_cap(RunCap(float(run_usd), cap.started))
    if day_usd is not None:
        values[DAY_CAP] = _text(day_usd)
    state.set_flags(values)


def read_caps(state: Flags) -> SpendCaps:
    """The caps the database holds."""
    flags = state.get_flags("spend.")
    runs = {}
    for key, value in flags.items():
        if key.startswith(RUN_CAPS):
            stored = json.loads(value)
            ended = stored.get("ended")
            runs[key[len(RUN_CAPS) :]] = RunCap(
                float(stored["max_usd"]),
                datetime.fromisoformat(stored["started"]),
                datetime.fromisoformat(ended) if ended else None,
            )
    return SpendCaps(day_usd=_number(flags.get(DAY_CAP)), runs=runs)


def expected_cost(request: PreparedRequest, mode: ProcessingMode, prices: ModelPrices) -> float:
    """What one request is expected to cost: its input tokens by the documented counting rule, and
    the output a page usually brings."""
    pages = request.last_page - request.first_page + 1
    usage = Usage(
        input_tokens=request.input_tokens,
        output_tokens=pages * EXPECTED_OUTPUT_TOKENS_PER_PAGE,
    )
    return cost_usd({mode: usage}, prices)


def committed(state: ChunkStates, since: datetime, prices: ModelPrices, run: str | None = None) -> float:
    """Spend committed since ``since`` (of ``run``'s jobs, or all): expected for requests in
    flight, actual for answers."""
    in_flight, answered = state.spend_since(since, run)
    return round(in_flight + cost_usd(answered, prices), 6)


class SpendGate:
    """Decides which requests may be sent now; the coordinator asks before every send."""

    def __init__(self, state: SpendState, prices: ModelPrices, now: Callable[[], datetime] = utc_now) -> None:
        self._state = state
        self._prices = prices
        self._now = now

    def admit(
        self, requests: Sequence[PreparedRequest], sync_jobs: set[int]
    ) -> tuple[list[PreparedRequest], int]:
        """The requests that may go (whole jobs, oldest first) and how many wait for a higher cap:
        a job past its run's cap waits, and that run's later jobs with it; past the day's, all."""
        if not requests:
            return [], 0
        caps = read_caps(self._state)
        runs = self._state.spend_runs({r.job_id for r in requests}) if caps.going else {}
        room = self._room(caps, set(runs.values()))
        costs = {r.custom_id: expected_cost(r, _mode(r, sync_jobs), self._prices) for r in requests}
        admitted: list[PreparedRequest] = []
        parked: str | None = None
        by_job: dict[int, list[PreparedRequest]] = {}  # in the order the jobs first come
        for request in requests:
            by_job.setdefault(request.job_id, []).append(request)
        for job_id, job in by_job.items():
            need = sum(costs[r.custom_id] for r in job)
            limits = [DAY_CAP, RUN_CAPS + runs[job_id] if job_id in runs else DAY_CAP]
            short = next((key for key in limits if need > room.get(key, float("inf")) + 1e-12), None)
            if short is not None:
                parked = parked or self._reason(caps, short, need, room[short])
                room[short] = float("-inf")  # nothing more under that cap: oldest first
                continue
            for key in set(limits) & set(room):
                room[key] -= need
            admitted.extend(job)
        self._state.set_flags({PARKED: parked})
        sent = {r.custom_id: (_mode(r, sync_jobs), costs[r.custom_id]) for r in admitted}
        self._state.record_sent(sent)
        return admitted, len(requests) - len(admitted)

    def _room(self, caps: SpendCaps, runs: set[str]) -> dict[str, float]:
        """Dollars that may still be committed under each cap that governs these requests."""
        now = self._now()
        room: dict[str, float] = {}
        for run_id in runs & set(caps.going):
            cap = caps.runs[run_id]
            room[RUN_CAPS + run_id] = cap.max_usd - committed(self._state, cap.started, self._prices, run_id)
        if caps.day_usd is not None:
            midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
            room[DAY_CAP] = caps.day_usd - committed(self._state, midnight, self._prices)
        return room

    @staticmethod
    def _reason(caps: SpendCaps, key: str, need: float, room: float) -> str:
        if key == DAY_CAP:
            limit, how = f"${caps.day_usd or 0:.4f} a day", "--max-daily-cost-usd"
        else:
            limit, how = f"${caps.runs[key[len(RUN_CAPS) :]].max_usd:.4f} a run", "--max-cost-usd"
        return (
            f"spend cap {limit} reached: the next job needs ${need:.4f}, ${max(room, 0):.4f} is left; "
            f"raise it with `raybatch resume {how} N`"
        )


def parked_reason(state: Flags) -> str | None:
    """Why submissions wait for a higher cap, or None."""
    return state.get_flags(PARKED).get(PARKED)


def spend_status(state: SpendState, prices: ModelPrices) -> dict[str, object]:
    """The caps, what is committed under them, and whether work is parked: for ``status`` (the
    run figures are those of the capped run started last; ``runs`` has each)."""
    caps = read_caps(state)
    now = utc_now()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    runs = {
        run_id: {"max_usd": cap.max_usd, "committed_usd": committed(state, cap.started, prices, run_id)}
        for run_id, cap in caps.runs.items()
    }
    latest = caps.latest
    return {
        "max_run_usd": caps.run_usd,
        "max_day_usd": caps.day_usd,
        "committed_run_usd": runs[latest[0]]["committed_usd"] if latest else 0.0,
        "committed_day_usd": committed(state, midnight, prices),
        "runs": runs,
        "parked": parked_reason(state),
    }


def _mode(request: PreparedRequest, sync_jobs: set[int]) -> ProcessingMode:
    return ProcessingMode.SYNC if request.job_id in sync_jobs else ProcessingMode.BATCH


def _text(value: float | None) -> str | None:
    return None if value is None else repr(float(value))


def _number(value: str | None) -> float | None:
    return None if value is None else float(value)


def _run_cap(cap: RunCap) -> str:
    ended = None if cap.ended is None else cap.ended.isoformat()
    return json.dumps({"max_usd": cap.max_usd, "started": cap.started.isoformat(), "ended": ended})
