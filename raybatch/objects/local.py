"""A folder as an object store: one file per key, metadata in a hidden JSON sidecar beside it.

Writes are atomic (temp file, fsync, rename): a reader sees the old object or the new one. The object
and its sidecar are renamed one after the other, so only a crash between the two renames can pair new
bytes with the previous metadata.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Iterable, Iterator, Mapping
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
from raybatch.objects.port import DEFAULT_CONTENT_TYPE, ObjectInfo

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
        self._write(key, [bytes(data)], content_type, metadata)

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
            self._write(key, files.read_chunks(handle), content_type, metadata)

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
        if not Path(os.path.realpath(path)).is_relative_to(os.path.realpath(self._root)):
            raise InvalidObjectKey("object key resolves outside the store's folder")
        return path

    def _write(
        self, key: str, chunks: Iterable[bytes], content_type: str, metadata: Mapping[str, str] | None
    ) -> None:
        path = self._path(key)
        sidecar = json.dumps(
            {"content_type": validate_content_type(content_type), "metadata": validate_metadata(metadata)},
            ensure_ascii=True,
        ).encode()
        with _translated(f"write {key}"):
            data_tmp = files.stage(path, chunks, private=True)  # outputs are the owner's alone
            try:
                meta_tmp = files.stage(_sidecar_path(path), [sidecar], private=True)
            except BaseException:
                files.discard(data_tmp)
                raise
            try:
                files.commit(data_tmp, path)
            except BaseException:
                files.discard(meta_tmp)
                raise
            files.commit(meta_tmp, _sidecar_path(path))
            files.sync_folder(path.parent)

    @staticmethod
    def _read_sidecar(path: Path) -> tuple[str, dict[str, str]]:
        try:
            saved = json.loads(_sidecar_path(path).read_bytes())
        except _MISSING:
            return DEFAULT_CONTENT_TYPE, {}  # a file someone put there by hand
        except ValueError:
            raise StorageRejected("local metadata sidecar is not valid JSON") from None
        return saved.get("content_type", DEFAULT_CONTENT_TYPE), dict(saved.get("metadata", {}))


def _sidecar_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.meta.json")


def _may_hold(folder: str, prefix: str) -> bool:
    """True when keys under ``folder`` (ending in '/') can start with ``prefix``."""
    return (
        not folder.startswith(".")
        and "/." not in folder
        and (folder.startswith(prefix) or prefix.startswith(folder))
    )
