"""Creating Message Batches exactly once, and reconciling the creates a crash or an error cut short.

The intent (its custom_ids) is recorded before the create call. A created batch is kept in memory
until it is recorded as such, so a database error after a create is followed by recording it again,
never by a second create. An intent left CREATING (the process died, or the create failed in a way
that may hide a batch) is reconciled: the batch the API made for it is adopted — its results are
checked to be ours before any is filed (``batch_poll``): each request is sent under a custom_id
marked with this database, since job numbers repeat across databases — or, if there is none, the
intent is dropped and its requests go again.

Several coordinators may share one database. The database holds each request in one CREATING
intent at most (a second intent is refused: the requests are on their way already); the batch ids
known are read again at each look after a failed create, so a batch another coordinator recorded
meanwhile is never adopted; and a batch adopted by listing yields to the intent whose own create
returned it (that intent's record takes it back; the adopter is reconciled again).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from raybatch.claude.batch_client import AnthropicBatchClient
from raybatch.claude.records import BatchState, PreparedRequest
from raybatch.errors import IntentConflict, OutagePastBudget, PermanentError, SpendLimitReached
from raybatch.ids import marked_custom_id
from raybatch.metrics import Metrics
from raybatch.models import BatchStatus
from raybatch.state.port import BatchRecord, BatchStates, Flags
from raybatch.units import MB

log = logging.getLogger(__name__)

Io = Callable[..., Awaitable[Any]]  # runs a blocking call on the coordinator's pool


class BatchCreatorState(BatchStates, Flags, Protocol):
    """The slices of the state store that creating batches uses."""


class BatchCreator:
    """Creates batches once and reconciles intents; owned by the coordinator."""

    def __init__(
        self,
        state: BatchCreatorState,
        batches: AnthropicBatchClient,
        *,
        io: Io,
        outage_budget: float,
        metrics: Metrics,
        coordinator_id: str | None = None,
    ) -> None:
        self._id = coordinator_id  # recorded with each intent: this coordinator polls its batch
        self._state = state
        self._batches = batches
        self._io = io
        self._outage_budget = outage_budget
        self._metrics = metrics
        self._unattached: dict[int, BatchState] = {}  # created, not yet recorded as such
        self._adopted: set[str] = set()  # batch ids found by listing, not returned by our create

    async def create(self, group: Sequence[PreparedRequest]) -> None:
        """Create one batch of ``group``. Raises what the create raised: PermanentError (nothing
        created), SpendLimitReached, OutagePastBudget (the API stayed down; the intent is kept when a
        batch may exist), or a database error (the created batch is recorded later)."""
        custom_ids = [r.custom_id for r in group]
        size = sum(r.encoded_size for r in group)
        try:
            intent_id = await self._io(self._state.record_batch_intent, custom_ids, size, self._id)
        except IntentConflict as exc:  # another coordinator holds them: they are on their way
            log.warning("batch not created: %s", exc)
            return
        intent = await self._io(self._state.get_batch, intent_id)
        database = await self._io(self._state.database_id)
        sent = [_marked(r, database) for r in group]
        try:
            batch = await self._io(
                self._batches.create_reconciled,
                sent,
                created_after=intent.created_at,
                known_ids=self._state.known_batch_ids,  # read again at each look: others record theirs
                budget=self._outage_budget,
                on_adopt=lambda found: self._adopted.add(found.id),
            )
        except (PermanentError, SpendLimitReached, OutagePastBudget) as exc:
            if not isinstance(exc, OutagePastBudget) or not exc.maybe_created:
                await self._io(self._state.mark_batch_lost, intent_id)  # surely nothing was created
            raise
        self._unattached[intent_id] = batch
        if not await self._attach(intent_id, batch):
            await self.reconcile(await self._io(self._state.get_batch, intent_id))
            return
        self._metrics.batch_created(len(group), size)
        log.info("batch %s created: %d requests, %.1f MB", batch.id, len(group), size / MB)

    async def record_created(self) -> None:
        """Record the batches created whose recording failed before."""
        for intent_id, batch in list(self._unattached.items()):
            await self._attach(intent_id, batch)

    async def reconcile(self, record: BatchRecord) -> bool:
        """An intent never recorded as created: adopt the batch the API has for it (True), or mark
        it lost so its requests go again (False). Intents this process created are only recorded."""
        if record.id in self._unattached:
            await self._attach(record.id, self._unattached[record.id])
            return True
        known = await self._io(self._state.known_batch_ids)
        found = await self._io(self._batches.find_created, record.request_count, record.created_at, known)
        if found is not None:
            self._adopted.add(found.id)
        if found is None or not await self._attach(record.id, found):
            await self._io(self._state.mark_batch_lost, record.id)
            log.info("recovery: batch intent %d was never created", record.id)
            return False
        log.info("recovery: batch intent %d adopted as %s", record.id, found.id)
        return True

    async def _attach(self, intent_id: int, batch: BatchState) -> bool:
        """Record the created batch; its chunks become submitted in the same transaction. False
        for a batch adopted by listing that another intent (another coordinator's create) holds:
        it was not ours."""
        raw = json.dumps(dict(batch.raw), default=str)
        adopted = batch.id in self._adopted
        attach = self._state.attach_batch
        attached = await self._io(attach, intent_id, batch.id, BatchStatus.IN_PROGRESS, raw, adopted=adopted)
        self._unattached.pop(intent_id, None)
        self._adopted.discard(batch.id)
        if not attached:
            log.warning("batch %s, found after a failed create, is another coordinator's", batch.id)
        return bool(attached)


def _marked(request: PreparedRequest, database_id: str) -> PreparedRequest:
    """The request as sent: its custom_id marked with this database (see ``marked_custom_id``)."""
    sent = marked_custom_id(request.custom_id, database_id)
    size = request.encoded_size + len(sent) - len(request.custom_id)
    return replace(request, custom_id=sent, encoded_size=size)
