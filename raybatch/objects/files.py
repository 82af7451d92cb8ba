"""Atomic file writes: a hidden temp file beside the target, fsync, then one rename.

A reader sees the old file or the new one, never a part; a failed write leaves only the old file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from raybatch.units import MIB

CHUNK_BYTES = MIB


def stage(path: Path, chunks: Iterable[bytes], *, private: bool = False) -> Path:
    """Write ``chunks`` to a fresh hidden temp file beside ``path``, fsynced; return the temp path.

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


def write_atomic(path: Path, chunks: Iterable[bytes]) -> None:
    """Replace ``path`` with ``chunks`` in one step."""
    commit(stage(path, chunks), path)
    sync_folder(path.parent)


def read_chunks(handle: BinaryIO, size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """A binary stream in blocks."""
    while chunk := handle.read(size):
        yield chunk
