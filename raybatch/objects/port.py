"""The object store's interface: bytes under keys built from ids, with metadata on the side.

Implementations: ``LocalObjectStore`` (a folder; atomic temp + rename), ``MinioObjectStore`` (MinIO/S3
through the minio SDK), ``MemoryObjectStore`` (tests). Keys are validated: they never escape the root.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol


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
        content_type: str = "application/octet-stream",
        metadata: Mapping[str, str] | None = None,
    ) -> None: ...

    def get(self, key: str) -> bytes:
        """The object's bytes; raises ObjectNotFound."""
        ...

    def head(self, key: str) -> ObjectInfo | None: ...

    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys under a prefix, sorted."""
        ...

    def delete(self, key: str) -> None: ...

    def uri(self, key: str) -> str:
        """Where a user finds the object (a path or an s3:// URI)."""
        ...
