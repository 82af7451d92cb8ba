"""The spend cap: ``MAX_COST_USD`` per run and ``MAX_DAILY_COST_USD`` per UTC day across runs.

What counts is *committed* spend: the expected cost of requests in flight plus the actual cost of
requests answered, since the run started (or the day began). Before the coordinator sends anything,
``SpendGate.admit`` lets whole jobs go, oldest first, while the committed spend plus what they are
expected to cost stays within every cap; the others stay prepared (parked), and the reason is stored
where progress and ``status`` read it. The caps live in the database, so ``raybatch resume
--max-cost-usd N`` raises them for the coordinator already running; it reads them on every pass.
Nothing paid for is lost: parked chunks keep their payloads and answers already filed stay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from raybatch.claude.emulator.tokens import IMAGE_TOKEN_CAP, estimate_input_tokens
from raybatch.claude.records import PreparedRequest
from raybatch.cost import EXPECTED_OUTPUT_TOKENS_PER_PAGE, ModelPrices, cost_usd
from raybatch.models import ProcessingMode, Usage
from raybatch.state.base import utc_now
from raybatch.state.port import ChunkStates, Flags

RUN_CAP = "spend.max_run_usd"
DAY_CAP = "spend.max_day_usd"
RUN_STARTED = "spend.run_started"
PARKED = "spend.parked"


class SpendState(ChunkStates, Flags, Protocol):
    """The slices of the state store the spend gate reads (caps) and stamps (requests sent)."""


@dataclass(frozen=True)
class SpendCaps:
    """The caps in force (None: no cap) and when the current run started."""

    run_usd: float | None
    day_usd: float | None
    run_started: datetime | None


def start_run(state: Flags, run_usd: float | None, day_usd: float | None) -> None:
    """A run begins: its spend counts from now, under these caps (None removes a cap)."""
    state.set_flags(
        {
            RUN_CAP: _text(run_usd),
            DAY_CAP: _text(day_usd),
            RUN_STARTED: utc_now().isoformat(),
            PARKED: None,
        }
    )


def raise_caps(state: Flags, run_usd: float | None, day_usd: float | None) -> None:
    """Set the caps given (``resume`` with a higher cap); a cap not given stays as it is."""
    given = {RUN_CAP: run_usd, DAY_CAP: day_usd}
    state.set_flags({key: _text(value) for key, value in given.items() if value is not None})


def read_caps(state: Flags) -> SpendCaps:
    """The caps the database holds."""
    flags = state.get_flags("spend.")
    started = flags.get(RUN_STARTED)
    return SpendCaps(
        run_usd=_number(flags.get(RUN_CAP)),
        day_usd=_number(flags.get(DAY_CAP)),
        run_started=datetime.fromisoformat(started) if started else None,
    )


def expected_cost(request: PreparedRequest, mode: ProcessingMode, prices: ModelPrices) -> float:
    """What one request is expected to cost: its input tokens by the documented counting rule, and
    the output a page usually brings."""
    pages = request.last_page - request.first_page + 1
    usage = Usage(
        input_tokens=estimate_input_tokens(request.params, IMAGE_TOKEN_CAP),
        output_tokens=pages * EXPECTED_OUTPUT_TOKENS_PER_PAGE,
    )
    return cost_usd({mode: usage}, prices)


def committed(state: ChunkStates, since: datetime, prices: ModelPrices) -> float:
    """Spend committed since ``since``: expected for requests in flight, actual for answers."""
    in_flight, answered = state.spend_since(since)
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
        """The requests that may go (whole jobs, oldest first) and how many wait for a higher cap."""
        if not requests:
            return [], 0
        caps = read_caps(self._state)
        room = self._room(caps)
        costs = {r.custom_id: expected_cost(r, _mode(r, sync_jobs), self._prices) for r in requests}
        admitted: list[PreparedRequest] = []
        for job_id in dict.fromkeys(r.job_id for r in requests):
            job = [r for r in requests if r.job_id == job_id]
            need = sum(costs[r.custom_id] for r in job)
            if need > room + 1e-12:
                self._park(caps, need, room)
                break
            room -= need
            admitted.extend(job)
        else:
            self._state.set_flags({PARKED: None})
        sent = {r.custom_id: (_mode(r, sync_jobs), costs[r.custom_id]) for r in admitted}
        self._state.record_sent(sent)
        return admitted, len(requests) - len(admitted)

    def _room(self, caps: SpendCaps) -> float:
        """Dollars that may still be committed under every cap."""
        now = self._now()
        room = float("inf")
        if caps.run_usd is not None:
            room = min(room, caps.run_usd - committed(self._state, caps.run_started or now, self._prices))
        if caps.day_usd is not None:
            midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
            room = min(room, caps.day_usd - committed(self._state, midnight, self._prices))
        return room

    def _park(self, caps: SpendCaps, need: float, room: float) -> None:
        limits = ", ".join(
            f"${cap:.4f} a {name}" for name, cap in (("run", caps.run_usd), ("day", caps.day_usd)) if cap
        )
        reason = (
            f"spend cap {limits} reached: the next job needs ${need:.4f}, ${max(room, 0):.4f} is left; "
            "raise it with `raybatch resume --max-cost-usd N`"
        )
        self._state.set_flags({PARKED: reason})


def parked_reason(state: Flags) -> str | None:
    """Why submissions wait for a higher cap, or None."""
    return state.get_flags(PARKED).get(PARKED)


def spend_status(state: SpendState, prices: ModelPrices) -> dict[str, object]:
    """The caps, what is committed under them, and whether work is parked: for ``status``."""
    caps = read_caps(state)
    now = utc_now()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return {
        "max_run_usd": caps.run_usd,
        "max_day_usd": caps.day_usd,
        "committed_run_usd": committed(state, caps.run_started, prices) if caps.run_started else 0.0,
        "committed_day_usd": committed(state, midnight, prices),
        "parked": parked_reason(state),
    }


def _mode(request: PreparedRequest, sync_jobs: set[int]) -> ProcessingMode:
    return ProcessingMode.SYNC if request.job_id in sync_jobs else ProcessingMode.BATCH


def _text(value: float | None) -> str | None:
    return None if value is None else repr(float(value))


def _number(value: str | None) -> float | None:
    return None if value is None else float(value)
