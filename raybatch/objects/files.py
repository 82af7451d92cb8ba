"""Atomic file writes: a hidden temp file beside the target, made durable, then one rename.

A reader sees the old file or the new one, never a part; a failed write leaves only the old file.
One file is fsynced on its own (``write_atomic``); several are staged unsynced and made durable
together (``commit_all``): one ``syncfs(2)`` of their filesystem before the renames and one after,
where Linux has it, instead of an fsync per file and per folder.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import secrets
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from raybatch.units import MIB

CHUNK_BYTES = MIB


def stage(path: Path, chunks: Iterable[bytes], *, private: bool = False, sync: bool = True) -> Path:
    """Write ``chunks`` to a fresh hidden temp file beside ``path``, fsynced unless not ``sync``
    (``commit_all`` makes it durable then); return the temp path.

    ``private``: the file is the owner's alone (0o600), and so is each folder made for it (0o700);
    otherwise both follow the caller's umask (a file the user asked for, where they asked)."""
    if private:
        make_private_folders(path.parent)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    # os.open with 0o666 keeps the caller's umask, unlike mkstemp's private 0o600.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            if sync:
                os.fsync(handle.fileno())
    except BaseException:
        discard(tmp)
        raise
    return tmp


def make_private_folders(folder: Path) -> None:
    """``folder`` and each missing folder above it, made readable by their owner only (0o700)."""
    missing = []
    while not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another writer
            made.mkdir(mode=0o700)


def commit(tmp: Path, path: Path) -> None:
    """Rename a staged temp file over ``path`` (removing the temp file if the rename fails)."""
    try:
        os.replace(tmp, path)
    except BaseException:
        discard(tmp)
        raise


def discard(tmp: Path) -> None:
    """Remove a staged temp file, if it is still there."""
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def sync_folder(folder: Path) -> None:
    """Make renames inside ``folder`` durable (best effort where folders cannot be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def commit_all(staged: Sequence[tuple[Path, Path]], root: Path) -> None:
    """Rename each staged ``(temp, target)`` in order, durably: the temp files are synced first (one
    ``sync_filesystem`` of ``root``, else an fsync of each) and the renames after (again one sync,
    else an fsync of each folder). On failure the temp files not yet renamed are removed."""
    done = 0
    try:
        if not sync_filesystem(root):
            for tmp, _ in staged:
                sync_file(tmp)
        for tmp, path in staged:
            os.replace(tmp, path)
            done += 1
    finally:
        for tmp, _ in staged[done:]:
            discard(tmp)
    if not sync_filesystem(root):
        for folder in dict.fromkeys(path.parent for _, path in staged):
            sync_folder(folder)


def sync_filesystem(path: Path) -> bool:
    """Flush the whole filesystem holding ``path`` to disk (Linux ``syncfs(2)``): True when done,
    False where there is no syncfs or it failed (the caller then fsyncs each file it wrote)."""
    syncfs = _syncfs()
    if syncfs is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        return syncfs(fd) == 0
    finally:
        os.close(fd)


@functools.cache
def _syncfs() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):  # no libc to load, or one without syncfs
        return None


def sync_file(path: Path) -> None:
    """Make a written file's bytes durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, chunks: Iterable[bytes]) -> None:
    """Replace ``path`` with ``chunks`` in one step."""
    commit(stage(path, chunks), path)
    sync_folder(path.parent)


def read_chunks(handle: BinaryIO, size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """A binary stream in blocks."""
    while chunk := handle.read(size):
        yield chunk
