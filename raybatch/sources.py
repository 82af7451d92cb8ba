"""Sources: where input files come from (a local folder, an ``s3://bucket/prefix``, a list of paths)
and how their bytes are read back by any worker.

A source file is known by its URI (``file:///abs/path`` or ``s3://bucket/name``); its user-given
name is kept as metadata only and never becomes an object key. Listing streams: a folder is walked
one directory at a time and an S3 prefix is read one page of keys at a time, so a backlog of a
million files is never listed into memory first.

Reading is safe against a changing folder: a link is never followed when read (a folder's link
whose target stays inside the folder is listed by its target; one leading out keeps its own path,
so reading it fails its job), only regular files are read, and every read after registration is
checked against the sha256 registered, so a replaced file fails its job instead of being used.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlparse

from raybatch.errors import ConfigError, InvalidSource, SourceProblem, StorageUnavailable
from raybatch.ids import sha256_bytes
from raybatch.outage import Patience
from raybatch.settings import StoreSettings

if TYPE_CHECKING:
    from raybatch.objects.minio import MinioObjectStore

SOURCE_SUFFIXES = frozenset({".pdf", ".jpg", ".jpeg", ".png", ".tif", ".tiff"})


@dataclass(frozen=True)
class SourceFile:
    """One input file: where to read it, the name the user gave it (as safe text), its size."""

    uri: str
    name: str
    size: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", safe_name(self.name))


def safe_name(raw: str) -> str:
    """A file name as text every database, log line and metadata value accepts: bytes that are not
    UTF-8 (kept by the OS decoding as surrogates) and control or format characters are written as
    backslash escapes (``caf\\xe9.pdf``, ``a\\nb.pdf``); any other name is returned unchanged."""
    try:
        text = raw.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that no file system decoding made
        text = raw.encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(_escaped(ch) if unicodedata.category(ch)[0] == "C" else ch for ch in text)


def _escaped(ch: str) -> str:
    return ch.encode("unicode_escape").decode("ascii")


@dataclass(frozen=True)
class SourceListing:
    """Files to register, and files passed over (not a PDF or image by their suffix)."""

    files: list[SourceFile]
    skipped: list[str]


def list_sources(source: str | Sequence[str], settings: StoreSettings) -> SourceListing:
    """Every PDF or image under a folder or S3 prefix, or the given list of paths."""
    skipped: list[str] = []
    files = list(iter_sources(source, settings, on_skip=skipped.append))
    return SourceListing(files=files, skipped=skipped)


def iter_sources(
    source: str | Sequence[str],
    settings: StoreSettings,
    *,
    on_skip: Callable[[str], None] = lambda name: None,
    page_size: int = 1000,
) -> Iterator[SourceFile]:
    """The PDFs and images under ``source`` as they are listed, in name order; other files are
    passed to ``on_skip`` by name. Errors in ``source`` itself are raised before the first file."""
    if not isinstance(source, str):
        return _kept([_local_file(Path(p)) for p in source], on_skip)
    if source.lower().startswith("s3://"):
        return _kept(_s3_files(source, settings, page_size), on_skip)
    path = Path(source)
    if path.is_file():
        return _kept([_local_file(path)], on_skip)
    if not path.is_dir():
        raise ConfigError(f"source {source!r} is neither a folder, a file nor an s3:// prefix")
    return _kept(_folder_files(path), on_skip)


def _kept(files: Iterable[SourceFile], on_skip: Callable[[str], None]) -> Iterator[SourceFile]:
    for file in files:
        if Path(file.name).suffix.lower() in SOURCE_SUFFIXES:
            yield file
        else:
            on_skip(file.name)


def _folder_files(root: Path) -> Iterator[SourceFile]:
    base = root.resolve()
    return (_folder_file(base, root, entry) for entry in _walk(root))


def _walk(folder: Path | str) -> Iterator[os.DirEntry[str]]:
    """Files under ``folder`` in path order (as ``sorted(rglob)`` would give), hidden ones left out,
    one directory in memory at a time. Linked folders are not entered (as rglob does not); linked
    files are checked by _folder_file. ``scandir`` keeps each entry's type: one call a folder."""
    with os.scandir(folder) as listing:
        entries = sorted(listing, key=lambda e: e.name + ("/" if _is_folder(e) else ""))
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if _is_folder(entry):
            yield from _walk(entry.path)
        elif entry.is_file():
            yield entry


def _is_folder(entry: os.DirEntry[str]) -> bool:
    return entry.is_dir(follow_symlinks=False)


def read_source(uri: str, settings: StoreSettings, *, sha256: str | None = None) -> bytes:
    """The bytes of a source file; InvalidSource when it is gone, unreadable, a link, not a regular
    file, or (``sha256`` given) no longer the file that was registered."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        data = _read_local(Path(unquote(parsed.path, errors="surrogateescape")))
    elif parsed.scheme == "s3":
        # Only the separator goes: a key of its own starting with "/" (s3://b//k) is read as itself.
        data = _source_store(parsed.netloc, settings).read_source_object(unquote(parsed.path[1:]))
    else:
        raise ConfigError(f"unsupported source URI scheme {parsed.scheme!r}")
    if sha256 is not None and sha256_bytes(data) != sha256:
        raise InvalidSource(
            f"the file's bytes are no longer those registered (sha256 {sha256[:12]}...); "
            "register it again to process the new file",
            reason=SourceProblem.CHANGED,
        )
    return data


def read_source_patiently(uri: str, settings: StoreSettings, *, sha256: str | None = None) -> bytes:
    """``read_source``, waiting out an outage of the object store for STORE_OUTAGE_BUDGET seconds
    (every read of a source: registration, preparation, writing)."""
    patience = Patience("object store", StorageUnavailable, settings.store_outage_budget)
    return patience.call(lambda: read_source(uri, settings, sha256=sha256))


def _read_local(path: Path) -> bytes:
    """Read a regular file without following a link and without blocking on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if path.is_symlink():
            raise InvalidSource(
                "the file is a symbolic link leading out of its source folder; links are not followed",
                reason=SourceProblem.LINKED,
            ) from exc
        raise InvalidSource(f"cannot read source file: {_why(exc)}", reason=SourceProblem.UNREADABLE) from exc
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise InvalidSource("the source is not a regular file", reason=SourceProblem.NOT_A_FILE)
        try:
            return handle.read()
        except OSError as exc:
            raise InvalidSource(
                f"cannot read source file: {_why(exc)}", reason=SourceProblem.UNREADABLE
            ) from exc


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _local_file(path: Path) -> SourceFile:
    resolved = path.resolve()
    if not resolved.is_file():
        raise ConfigError(f"source file {str(path)!r} does not exist")
    return SourceFile(uri=resolved.as_uri(), name=path.name, size=resolved.stat().st_size)


def _folder_file(base: Path, root: Path, entry: os.DirEntry[str]) -> SourceFile:
    """A file found in a folder (``base`` is the folder resolved); a link is replaced by its target
    only when that stays inside."""
    own = base / Path(entry.path).relative_to(root)  # no linked folder on the way (not entered)
    if not entry.is_symlink():
        return SourceFile(uri=own.as_uri(), name=entry.name, size=entry.stat(follow_symlinks=False).st_size)
    target = own.resolve()
    if target.is_relative_to(base) and target.is_file():
        return SourceFile(uri=target.as_uri(), name=entry.name, size=target.stat().st_size)
    # A link leading out keeps its own path: reading it refuses the link (see _read_local).
    return SourceFile(uri=own.as_uri(), name=entry.name, size=own.lstat().st_size)


def _s3_files(source: str, settings: StoreSettings, page_size: int) -> Iterator[SourceFile]:
    bucket, _, prefix = source[len("s3://") :].partition("/")
    if not bucket:
        raise ConfigError("an S3 source is given as s3://bucket/prefix")
    client = _source_store(bucket, settings)._client()
    return (
        SourceFile(uri=f"s3://{bucket}/{quote(name)}", name=os.path.basename(name), size=o.size or 0)
        for o in list_pages(client.list_objects, bucket, prefix, page_size)
        if (name := o.object_name) and not o.is_dir and not name.endswith("/")
    )


def list_pages(
    list_objects: Callable[..., Iterable[Any]], bucket: str, prefix: str, page_size: int
) -> Iterator[Any]:
    """Objects under ``prefix`` in key order, one page of keys requested at a time.

    Each page is its own listing request (``start_after`` the last key seen), and no page is asked
    for before the one before it has been consumed.
    """
    after: str | None = None
    while True:
        count = 0
        for item in list_objects(bucket, prefix=prefix, recursive=True, start_after=after):
            count += 1
            after = item.object_name
            yield item
            if count == page_size:
                break
        if count < page_size:
            return


def _source_store(bucket: str, settings: StoreSettings) -> MinioObjectStore:
    from raybatch.objects.minio import MinioObjectStore  # only S3 sources need the SDK

    return MinioObjectStore(
        bucket,
        endpoint=settings.s3_endpoint or "s3.amazonaws.com",
        access_key=settings.s3_access_key,
        secret_key=settings.s3_secret_key,
        secure=settings.s3_secure,
        region=settings.s3_region,
        create_bucket=False,
    )
