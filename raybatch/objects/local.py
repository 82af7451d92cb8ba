"""A folder as an object store: one file per key, metadata in a hidden JSON sidecar beside it,
where there is any to keep: an object without metadata whose name says its content type (``.pdf``,
``.json``: ``IMPLIED_TYPES``) is its file alone, one inode fewer for the filesystem to find.

Writes are atomic (temp file, rename): a reader sees the old object or the new one. Every object of
a write (``put_many``; ``put`` is one of them) is staged with its sidecar, all made durable together,
then renamed, the object before its sidecar, then the renames made durable (``files.commit_all``:
two filesystem syncs for the lot). Only a crash between an object's two renames (or between its
rename and the removal of a sidecar it no longer needs) can pair new bytes with the previous metadata.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from raybatch.errors import InvalidObjectKey, ObjectNotFound, StorageRejected, StorageUnavailable
from raybatch.objects import files
from raybatch.objects.keys import (
    listed,
    validate_content_type,
    validate_key,
    validate_metadata,
    validate_prefix,
)
from raybatch.objects.port import (
    DEFAULT_CONTENT_TYPE,
    JSON_TYPE,
    PARQUET_TYPE,
    PDF_TYPE,
    TEXT_TYPE,
    WEBP_TYPE,
    ObjectInfo,
    PutObject,
)

# The content type a name implies: an object of that type without metadata needs no sidecar.
IMPLIED_TYPES = {
    ".pdf": PDF_TYPE,
    ".webp": WEBP_TYPE,
    ".txt": TEXT_TYPE,
    ".json": JSON_TYPE,
    ".parquet": PARQUET_TYPE,
}

# One object of a write: its key, its bytes in chunks, its content type and metadata.
_Write = tuple[str, Iterable[bytes], str, Mapping[str, str] | None]

# Errors that no retry will fix: permissions, read-only disks, a file where a folder should be.
_PERMANENT_ERRNOS = {
    errno.EACCES,
    errno.EPERM,
    errno.EROFS,
    errno.EEXIST,
    errno.ENOTDIR,
    errno.EISDIR,
    errno.ENAMETOOLONG,
}
_MISSING = (FileNotFoundError, NotADirectoryError, IsADirectoryError)


@contextlib.contextmanager
def _translated(what: str) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        kind = StorageRejected if exc.errno in _PERMANENT_ERRNOS else StorageUnavailable
        raise kind(f"local store could not {what}: {exc.strerror or type(exc).__name__}") from exc


class LocalObjectStore:
    """Objects as files under ``root``; keys never resolve outside it."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        # Absolute now, so a copy unpickled in a Ray worker with another cwd finds the same folder.
        self._root = Path(root).expanduser().absolute()
        self._resolved: str | None = None

    def __repr__(self) -> str:
        return f"LocalObjectStore({str(self._root)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalObjectStore) and other._root == self._root

    def __hash__(self) -> int:
        return hash(self._root)

    @property
    def root(self) -> Path:
        """The folder holding the objects."""
        return self._root

    def put(
        self,
        key: str,
        data: bytes,
        *,
        content_type: str = DEFAULT_CONTENT_TYPE,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Store ``data`` under ``key``, replacing any object there, atomically."""
        self._write([(key, [bytes(data)], content_type, metadata)])

    def put_many(self, objects: Sequence[PutObject]) -> None:
        """Store each object atomically, all durable on return after two filesystem syncs in all;
        every one validated before the first is staged."""
        self._write([(one.key, [bytes(one.data)], one.content_type, one.metadata) for one in objects])

    def put_file(
        self,
        key: str,
        source: str | os.PathLike[str],
        *,
        content_type: str = DEFAULT_CONTENT_TYPE,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Store a local file's bytes under ``key``, streamed, atomically."""
        validate_key(key)
        with open(source, "rb") as handle:
            self._write([(key, files.read_chunks(handle), content_type, metadata)])

    def get(self, key: str) -> bytes:
        """The object's bytes; raises ObjectNotFound."""
        path = self._path(key)
        with _translated(f"read {key}"):
            try:
                return path.read_bytes()
            except _MISSING:
                raise ObjectNotFound(f"no object {key}") from None

    def get_file(self, key: str, destination: str | os.PathLike[str]) -> None:
        """Copy the object into a local file (atomically); raises ObjectNotFound."""
        path = self._path(key)
        with _translated(f"read {key}"):
            try:
                handle = open(path, "rb")  # noqa: SIM115 - closed below, after the copy
            except _MISSING:
                raise ObjectNotFound(f"no object {key}") from None
            with handle:
                files.write_atomic(Path(destination), files.read_chunks(handle))

    def head(self, key: str) -> ObjectInfo | None:
        """Size, content type and metadata of the object, or None when there is none."""
        path = self._path(key)
        with _translated(f"inspect {key}"):
            try:
                info = os.stat(path)
            except _MISSING:
                return None
            if not stat.S_ISREG(info.st_mode):
                return None
            content_type, metadata = self._read_sidecar(path)
        return ObjectInfo(key=key, size=info.st_size, content_type=content_type, metadata=metadata)

    def exists(self, key: str) -> bool:
        """True when an object is stored under ``key``."""
        return self.head(key) is not None

    def list(self, prefix: str = "") -> Iterator[str]:
        """Keys starting with ``prefix``, sorted."""
        prefix = validate_prefix(prefix)
        folder = prefix.rpartition("/")[0]
        start = self._root.joinpath(*folder.split("/")) if folder else self._root
        keys: list[str] = []
        for dirpath, dirnames, filenames in os.walk(start):
            relative = Path(dirpath).relative_to(self._root).as_posix()
            base = "" if relative == "." else f"{relative}/"
            dirnames[:] = [d for d in dirnames if _may_hold(f"{base}{d}/", prefix)]
            keys.extend(f"{base}{name}" for name in filenames)
        return iter(listed(keys, prefix))

    def delete(self, key: str) -> None:
        """Remove the object and its metadata; a missing object is not an error."""
        path = self._path(key)
        with _translated(f"delete {key}"):
            for target in (path, _sidecar_path(path)):
                with contextlib.suppress(*_MISSING):
                    os.unlink(target)

    def uri(self, key: str) -> str:
        """The object's path on this machine."""
        return str(self._path(key))

    def _path(self, key: str) -> Path:
        path = self._root.joinpath(*validate_key(key).split("/"))
        # Keys are already clean; this also refuses symlinks inside the root that point outside it.
        if not Path(os.path.realpath(path)).is_relative_to(self._real_root()):
            raise InvalidObjectKey("object key resolves outside the store's folder")
        return path

    def _real_root(self) -> str:
        """The root with its links resolved, once (every key's path is checked against it)."""
        if self._resolved is None:
            self._resolved = os.path.realpath(self._root)
        return self._resolved

    def _write(self, objects: Sequence[_Write]) -> None:
        """Stage every object and its sidecar (each validated first), then commit them together; an
        object that needs no sidecar loses the one an earlier version had, once it is renamed."""
        planned = [
            (key, self._path(key), chunks, _sidecar(key, kind, meta)) for key, chunks, kind, meta in objects
        ]
        staged: list[tuple[Path, Path]] = []  # (temp, target), each object before its sidecar
        unneeded: list[Path] = []
        try:
            for key, path, chunks, sidecar in planned:  # private: outputs are the owner's alone
                with _translated(f"write {key}"):
                    staged.append((files.stage(path, chunks, private=True, sync=False), path))
                    meta_path = _sidecar_path(path)
                    if sidecar is None:
                        unneeded.append(meta_path)
                    else:
                        staged.append(
                            (files.stage(meta_path, [sidecar], private=True, sync=False), meta_path)
                        )
        except BaseException:
            for tmp, _ in staged:
                files.discard(tmp)
            raise
        what = f"write {planned[0][0]}" if len(planned) == 1 else f"write {len(planned)} objects"
        if staged:
            with _translated(what):
                files.commit_all(staged, self._root)
                for meta_path in unneeded:
                    with contextlib.suppress(*_MISSING):
                        os.unlink(meta_path)

    @staticmethod
    def _read_sidecar(path: Path) -> tuple[str, dict[str, str]]:
        try:
            saved = json.loads(_sidecar_path(path).read_bytes())
        except _MISSING:
            return _implied_type(path.name), {}  # needed none, or a file someone put there by hand
        except ValueError:
            raise StorageRejected("local metadata sidecar is not valid JSON") from None
        return saved.get("content_type", DEFAULT_CONTENT_TYPE), dict(saved.get("metadata", {}))


def _sidecar(key: str, content_type: str, metadata: Mapping[str, str] | None) -> bytes | None:
    """An object's sidecar: its content type and metadata, validated, as JSON; None when it would
    say only what the key says."""
    saved = {"content_type": validate_content_type(content_type), "metadata": validate_metadata(metadata)}
    if not saved["metadata"] and content_type == _implied_type(key):
        return None
    return json.dumps(saved, ensure_ascii=True).encode()


def _implied_type(name: str) -> str:
    """The content type an object's name implies (``IMPLIED_TYPES``), else the default."""
    return IMPLIED_TYPES.get(os.path.splitext(name)[1], DEFAULT_CONTENT_TYPE)


def _sidecar_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.meta.json")


def _may_hold(folder: str, prefix: str) -> bool:
    """True when keys under ``folder`` (ending in '/') can start with ``prefix``."""
    return (
        not folder.startswith(".")
        and "/." not in folder
        and (folder.startswith(prefix) or prefix.startswith(folder))
    )
