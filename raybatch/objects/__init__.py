"""Object storage: one interface, a local folder, MinIO/S3, and an in-memory fake."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from raybatch.errors import ConfigError
from raybatch.objects.keys import validate_key
from raybatch.objects.local import LocalObjectStore
from raybatch.objects.memory import MemoryObjectStore
from raybatch.objects.port import DEFAULT_CONTENT_TYPE, ObjectInfo, ObjectStore, PutObject
from raybatch.settings import StoreSettings

if TYPE_CHECKING:
    from raybatch.objects.minio import MinioObjectStore, parse_s3_uri

__all__ = [
    "DEFAULT_CONTENT_TYPE",
    "LocalObjectStore",
    "MemoryObjectStore",
    "MinioObjectStore",
    "ObjectInfo",
    "ObjectStore",
    "PutObject",
    "open_store",
    "parse_s3_uri",
    "validate_key",
]


def __getattr__(name: str) -> Any:
    """The S3 parts, imported on first use: a process on a local store never loads the minio SDK."""
    if name in ("MinioObjectStore", "parse_s3_uri"):
        from raybatch.objects import minio

        return getattr(minio, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_store(settings: StoreSettings) -> ObjectStore:
    """The store ``settings.store`` names: ``s3://bucket/prefix`` is MinIO/S3, a path is a local folder."""
    target = settings.store.strip()
    if not target:
        raise ConfigError("STORE is empty: give a folder or s3://bucket/prefix")
    scheme = urlsplit(target).scheme.lower() if "://" in target else ""
    if scheme == "s3":
        from raybatch.objects.minio import MinioObjectStore

        return MinioObjectStore.from_settings(settings)
    if scheme == "file":
        return LocalObjectStore(unquote(urlsplit(target).path))
    if scheme:
        raise ConfigError(f"unsupported store scheme {scheme}://: use a folder or s3://bucket/prefix")
    return LocalObjectStore(target)
