"""The in-process object store: the fake that tests and notebooks use in place of a folder or S3.

It validates exactly as the real stores do, and can be told to fail its next operations
(``fail_next``) so callers' retry paths are testable. A pickled copy is an independent snapshot:
Ray actors that must share objects need a folder or S3.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raybatch.errors import ObjectNotFound, RaybatchError
from raybatch.objects import files
from raybatch.objects.keys import (
    listed,
    validate_content_type,
    validate_key,
    validate_metadata,
    validate_prefix,
)
from raybatch.objects.port import DEFAULT_CONTENT_TYPE, ObjectInfo, PutObject, put_each


@dataclass(frozen=True)
class _Stored:
    data: bytes
    content_type: str
    metadata: dict[str, str]


class MemoryObjectStore:
    """Objects in a dict, guarded by a lock."""

    def __init__(self, name: str = "memory") -> None:
        self._name = name
        self._objects: dict[str, _Stored] = {}
        self._failures: list[RaybatchError] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MemoryObjectStore({self._name!r}, {len(self._objects)} objects)"

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            return {"name": self._name, "objects": dict(self._objects), "failures": list(self._failures)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._name = state["name"]
        self._objects = state["objects"]
        self._failures = state["failures"]
        self._lock = threading.Lock()

    def fail_next(self, *errors: RaybatchError) -> None:
        """Make the next operations raise these errors, one per operation, in order."""
        with self._lock:
            self._failures.extend(errors)

    def put(
        self,
        key: str,
        data: bytes,
        *,
        content_type: str = DEFAULT_CONTENT_TYPE,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Store ``data`` under ``key``, replacing any object there."""
        validate_key(key)
        stored = _Stored(bytes(data), validate_content_type(content_type), validate_metadata(metadata))
        with self._lock:
            self._maybe_fail()
            self._objects[key] = stored

    def put_many(self, objects: Sequence[PutObject]) -> None:
        """Store each object in turn, all validated first (the set is not atomic)."""
        put_each(self, objects)

    def put_file(
        self,
        key: str,
        source: str | os.PathLike[str],
        *,
        content_type: str = DEFAULT_CONTENT_TYPE,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Store a local file's bytes under ``key``."""
        validate_key(key)
        self.put(key, Path(source).read_bytes(), content_type=content_type, metadata=metadata)

    def get(self, key: str) -> bytes:
        """The object's bytes; raises ObjectNotFound."""
        return self._stored(key).data

    def get_file(self, key: str, destination: str | os.PathLike[str]) -> None:
        """Write the object into a local file, atomically; raises ObjectNotFound."""
        files.write_atomic(Path(destination), [self._stored(key).data])

    def head(self, key: str) -> ObjectInfo | None:
        """Size, content type and metadata of the object, or None when there is none."""
        try:
            stored = self._stored(key)
        except ObjectNotFound:
            return None
        return ObjectInfo(key, len(stored.data), stored.content_type, dict(stored.metadata))

    def exists(self, key: str) -> bool:
        """True when an object is stored under ``key``."""
        return self.head(key) is not None

    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys starting with ``prefix``, sorted."""
        validate_prefix(prefix)
        with self._lock:
            self._maybe_fail()
            keys = listed(self._objects, prefix)
        return iter(keys)

    def delete(self, key: str) -> None:
        """Remove the object; a missing object is not an error."""
        validate_key(key)
        with self._lock:
            self._maybe_fail()
            self._objects.pop(key, None)

    def uri(self, key: str) -> str:
        """A memory:// URI naming the object."""
        return f"memory://{self._name}/{validate_key(key)}"

    def _stored(self, key: str) -> _Stored:
        validate_key(key)
        with self._lock:
            self._maybe_fail()
            stored = self._objects.get(key)
        if stored is None:
            raise ObjectNotFound(f"no object {key}")
        return stored

    def _maybe_fail(self) -> None:
        if self._failures:
            raise self._failures.pop(0)
