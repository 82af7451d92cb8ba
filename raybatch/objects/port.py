"""The object store's interface: bytes under keys built from ids, with metadata on the side.

Implementations: ``LocalObjectStore`` (a folder; atomic temp + rename), ``MinioObjectStore`` (MinIO/S3
through the minio SDK), ``MemoryObjectStore`` (the in-process fake). Keys are validated
(``raybatch.objects.keys``) before any storage is touched: they never escape the root. User file
names are never keys; they travel as metadata, whose values may be any Unicode text.

Every implementation pickles (Ray actors receive stores) and raises only raybatch errors:
``InvalidObjectKey`` for a refused key, prefix, content type or metadata; ``ObjectNotFound``;
``StorageUnavailable`` (transient) or ``StorageRejected``/``AuthenticationFailed`` (permanent).
``put_many`` puts several objects with one wait for durability where the store can (the local one).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from raybatch.objects.keys import validate_content_type, validate_key, validate_metadata

DEFAULT_CONTENT_TYPE = "application/octet-stream"
PDF_TYPE = "application/pdf"  # a document
WEBP_TYPE = "image/webp"  # a document's thumbnail
TEXT_TYPE = "text/plain; charset=utf-8"  # a document's text
JSON_TYPE = "application/json"  # a manifest, a spooled answer, a kept request, an S3 sidecar
PARQUET_TYPE = "application/vnd.apache.parquet"  # a documents table file


@dataclass(frozen=True)
class ObjectInfo:
    """What the store knows about one object."""

    key: str
    size: int
    content_type: str
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PutObject:
    """One object for ``put_many``: what ``put`` takes."""

    key: str
    data: bytes
    content_type: str = DEFAULT_CONTENT_TYPE
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

    def put_many(self, objects: Sequence[PutObject]) -> None:
        """Store each object as ``put`` does: each replaces what was under its key atomically (a
        reader sees the old object or the new one, never a part), and all are durable on return.

        The set is not atomic: a failure midway may leave some of them put (the caller retries or
        cleans up as after a failed ``put``). Raises what ``put`` raises; every key, content type and
        metadata is validated before any storage is touched."""
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


def put_each(store: ObjectStore, objects: Sequence[PutObject]) -> None:
    """``put_many`` as one ``store.put`` per object, every object validated before the first is put."""
    for one in objects:
        validate_key(one.key)
        validate_content_type(one.content_type)
        validate_metadata(one.metadata)
    for one in objects:
        store.put(one.key, one.data, content_type=one.content_type, metadata=one.metadata)
