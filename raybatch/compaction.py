"""The documents table's compaction at a run's end: one at a time per database.

Two runs on one database each end by compacting the table. Without a turn each, the second one
reads a file the first has just replaced, or writes the same rows twice; so compaction holds a named
lease in the database, renewed at every file it writes, and a run that finds it taken waits.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable

from raybatch.classes.settings import classes_of
from raybatch.errors import RaybatchError
from raybatch.ids import OutputKeys
from raybatch.objects import open_store
from raybatch.settings import RequestSettings, Settings, StoreSettings
from raybatch.state import StateStore
from raybatch.work.table_sink import Compaction, TableSink, gone_jobs

log = logging.getLogger(__name__)

LEASE = "compact.documents"
LEASE_SECONDS = 120.0  # a holder that stops renewing (killed) frees the table after this
POLL_SECONDS = 0.5

Notice = Callable[[str], None]


def compact_table(
    settings: Settings, state: StateStore, notice: Notice = log.info, *, patience: float = LEASE_SECONDS
) -> Compaction:
    """Compact the documents table: small files into few, superseded rows dropped. A run that finds
    another compacting waits up to ``patience`` seconds, then leaves its files to the next one."""
    store = open_store(settings.section(StoreSettings))
    classes = classes_of(settings.section(RequestSettings))
    sink = TableSink(store, OutputKeys(state.database_id()), classes=classes)
    holder = f"compact-{uuid.uuid4().hex[:8]}"

    def hold() -> bool:
        return state.take_lease(LEASE, holder, LEASE_SECONDS)

    if not _wait_for(hold, patience):
        notice("documents table: another run still compacts it; the next compaction takes this run's files")
        return Compaction(0, 0, 0, len(sink.files()))
    try:
        done = sink.compact(target_mb=settings.table_file_mb, gone=gone_jobs(state), hold=hold)
    finally:
        with contextlib.suppress(RaybatchError):  # unreleased, the lease ends by itself
            state.give_up_lease(LEASE, holder)
    if done.merged:
        notice(f"documents table: {done.merged} files compacted into {done.written}, {done.files} in all")
    return done


def _wait_for(ready: Callable[[], bool], patience: float) -> bool:
    """Ask ``ready`` until it says yes or ``patience`` seconds pass."""
    deadline = time.monotonic() + patience
    while not ready():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_SECONDS)
    return True
