"""The object store's interface: bytes under keys built from ids, with metadata on the side.

Implementations: ``LocalObjectStore`` (a folder; atomic temp + rename), ``MinioObjectStore`` (MinIO/S3
through the minio SDK), ``MemoryObjectStore`` (the in-process fake). Keys are validated
(``raybatch.objects.keys``) before any storage is touched: they never escape the root. User file
names are never keys; they travel as metadata, whose values may be any Unicode text.

Every implementation pickles (Ray actors receive stores) and raises only raybatch errors:
``InvalidObjectKey`` for a refused key, prefix, content type or metadata; ``ObjectNotFound``;
``StorageUnavailable`` (transient) or ``StorageRejected``/``AuthenticationFailed`` (permanent).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

DEFAULT_CONTENT_TYPE = "application/octet-stream"


@dataclass(frozen=True)
class ObjectInfo:
    """What the store knows about one object."""

    key: str
    size: int
    content_type: str
    metadata: Mapping[str, str] = field(default_factory=dict)


class ObjectStore(Protocol):
    """Put, get, list and delete objects under validated keys."""

    def put(
        self,
        key: str,
        data: bytes,
        *,
        content_type: str = DEFAULT_CONTENT_TYPE,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Store ``data`` under ``key``, replacing any object (and metadata) there."""
        ...

    def put_file(
        self,
        key: str,
        source: str | os.PathLike[str],
        *,
        content_type: str = DEFAULT_CONTENT_TYPE,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Store a local file under ``key``, streamed rather than read into memory."""
        ...

    def get(self, key: str) -> bytes:
        """The object's bytes; raises ObjectNotFound."""
        ...

    def get_file(self, key: str, destination: str | os.PathLike[str]) -> None:
        """Stream the object into a local file, replaced atomically; raises ObjectNotFound."""
        ...

    def head(self, key: str) -> ObjectInfo | None:
        """Size, content type and metadata of the object, or None when there is none."""
        ...

    def exists(self, key: str) -> bool:
        """True when an object is stored under ``key``."""
        ...

    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys under a prefix, sorted."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object and its metadata; a missing object is not an error."""
        ...

    def uri(self, key: str) -> str:
        """Where a user finds the object (a path or an s3:// URI)."""
        ...
