"""The answer spool: paid synchronous answers the database could not take, kept in the object store.

An answer whose filing fails (the database away) is written here before anything else, one object
per chunk, ``db-<id>/spool/job_<j>_batch_<n>.json``: keys from ids only, never a file name. The store
and not a local file, because the store outlives the coordinator's node and a restarted coordinator
may run on another one. An entry holds the answer and the tag it was sent under, nothing secret.

Filing an entry is idempotent: it goes through the filer, whose UPDATE touches only a chunk still
SUBMITTED under that tag, so a chunk already answered is never filed twice. Every coordinator files
the spool at start, and the lead before it releases any synchronous call, so no spooled chunk is
ever sent to Claude again.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from raybatch.claude.records import RequestResult
from raybatch.errors import ObjectNotFound
from raybatch.ids import OutputKeys, parse_custom_id
from raybatch.models import ResultType, Usage
from raybatch.objects.port import JSON_TYPE, ObjectStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Spooled:
    """One answer in the spool, and the batch id (the coordinator's tag) its chunk was sent under."""

    batch_id: str
    result: RequestResult

    @property
    def job_id(self) -> int:
        """The job the answer belongs to."""
        ids = parse_custom_id(self.result.custom_id)
        assert ids is not None  # only our custom_ids are spooled
        return ids[0]


class AnswerSpool:
    """One database's spooled answers in one object store."""

    def __init__(self, store: ObjectStore, keys: OutputKeys) -> None:
        self._store = store
        self._keys = keys

    def keep(self, batch_id: str, result: RequestResult) -> None:
        """Write one answer durably (the same chunk again replaces it)."""
        entry = {"batch_id": batch_id, "result": dataclasses.asdict(result)}
        data = json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode()
        self._store.put(self._key(result.custom_id), data, content_type=JSON_TYPE)

    def read(self) -> list[Spooled]:
        """Every answer the spool holds, by custom_id; raises when the store cannot be read."""
        found: list[Spooled] = []
        for key in self._store.list(self._keys.spool):
            try:
                found.append(_parse(self._store.get(key)))
            except ObjectNotFound:  # filed and dropped meanwhile by another coordinator
                continue
            except (ValueError, KeyError, TypeError) as exc:  # unreadable: its chunk goes again
                log.warning("spooled answer %s unreadable, skipped: %s", key, type(exc).__name__)
        return found

    def drop(self, custom_ids: Iterable[str]) -> None:
        """Remove the answers of ``custom_ids`` (filed); a missing one is not an error."""
        for cid in custom_ids:
            self._store.delete(self._key(cid))

    def _key(self, custom_id: str) -> str:
        ids = parse_custom_id(custom_id)
        if ids is None:
            raise ValueError(f"not a chunk's custom_id: {custom_id[:80]!r}")
        return self._keys.spooled_answer(*ids)


def _parse(data: bytes) -> Spooled:
    entry = json.loads(data)
    fields = dict(entry["result"])
    fields["type"] = ResultType(fields["type"])
    if fields.get("usage") is not None:
        fields["usage"] = Usage(**fields["usage"])
    return Spooled(str(entry["batch_id"]), RequestResult(**fields))
