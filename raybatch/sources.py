"""Sources: where input files come from (a local folder, an ``s3://bucket/prefix``, a list of paths)
and how their bytes are read back by any worker.

A source file is known by its URI (``file:///abs/path`` or ``s3://bucket/name``); its user-given
name is kept as metadata only and never becomes an object key.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

from raybatch.errors import ConfigError, InvalidSource
from raybatch.objects.minio import MinioObjectStore
from raybatch.settings import StoreSettings

SOURCE_SUFFIXES = frozenset({".pdf", ".jpg", ".jpeg", ".png", ".tif", ".tiff"})


@dataclass(frozen=True)
class SourceFile:
    """One input file: where to read it, the name the user gave it, its size."""

    uri: str
    name: str
    size: int


@dataclass(frozen=True)
class SourceListing:
    """Files to register, and files passed over (not a PDF or image by their suffix)."""

    files: list[SourceFile]
    skipped: list[str]


def list_sources(source: str | Sequence[str], settings: StoreSettings) -> SourceListing:
    """Every PDF or image under a folder or S3 prefix, or the given list of paths."""
    if not isinstance(source, str):
        return _listing([_local_file(Path(p)) for p in source])
    if source.lower().startswith("s3://"):
        return _listing(_s3_files(source, settings))
    path = Path(source)
    if path.is_file():
        return _listing([_local_file(path)])
    if not path.is_dir():
        raise ConfigError(f"source {source!r} is neither a folder, a file nor an s3:// prefix")
    files = [_local_file(p) for p in sorted(path.rglob("*")) if p.is_file() and not _hidden(p, path)]
    return _listing(files)


def read_source(uri: str, settings: StoreSettings) -> bytes:
    """The bytes of a source file; InvalidSource when it is gone or unreadable."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        path = Path(unquote(parsed.path))
        try:
            return path.read_bytes()
        except OSError as exc:
            raise InvalidSource(f"cannot read source file: {exc.strerror or type(exc).__name__}") from exc
    if parsed.scheme == "s3":
        return _source_store(parsed.netloc, settings).read_source_object(unquote(parsed.path.lstrip("/")))
    raise ConfigError(f"unsupported source URI scheme {parsed.scheme!r}")


def _listing(files: list[SourceFile]) -> SourceListing:
    keep = [f for f in files if Path(f.name).suffix.lower() in SOURCE_SUFFIXES]
    skipped = [f.name for f in files if Path(f.name).suffix.lower() not in SOURCE_SUFFIXES]
    return SourceListing(files=keep, skipped=skipped)


def _local_file(path: Path) -> SourceFile:
    resolved = path.resolve()
    if not resolved.is_file():
        raise ConfigError(f"source file {str(path)!r} does not exist")
    return SourceFile(uri=resolved.as_uri(), name=path.name, size=resolved.stat().st_size)


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _s3_files(source: str, settings: StoreSettings) -> list[SourceFile]:
    bucket, _, prefix = source[len("s3://") :].partition("/")
    if not bucket:
        raise ConfigError("an S3 source is given as s3://bucket/prefix")
    objects = _source_store(bucket, settings).source_objects(prefix)
    return [
        SourceFile(uri=f"s3://{bucket}/{quote(name)}", name=os.path.basename(name), size=size)
        for name, size in objects
        if not name.endswith("/")
    ]


def _source_store(bucket: str, settings: StoreSettings) -> MinioObjectStore:
    return MinioObjectStore(
        bucket,
        endpoint=settings.minio_endpoint or "s3.amazonaws.com",
        access_key=settings.minio_access_key,
        secret_key=settings.minio_secret_key,
        secure=settings.minio_secure,
        region=settings.minio_region,
        create_bucket=False,
    )
