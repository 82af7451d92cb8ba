"""Inspect a source file: read it, hash it and open it (its kind and pages), or say why it cannot
be processed. Run in registration's Ray tasks, near the data: this module and what it imports are
all a task worker loads for it (no database driver: the driver records what was found).
"""

from __future__ import annotations

from dataclasses import dataclass

from raybatch.errors import InvalidSource, RaybatchError, StorageUnavailable
from raybatch.ids import sha256_bytes
from raybatch.models import SourceKind
from raybatch.settings import StoreSettings
from raybatch.sources import SourceFile, read_source_patiently
from raybatch.steps.open_source import detect_kind, open_source


@dataclass(frozen=True)
class Inspection:
    """What reading a file told: its hash, size, kind and pages, or why it cannot be processed."""

    source: SourceFile
    sha256: str
    size: int
    kind: SourceKind
    pages: int | None = None
    problem: RaybatchError | None = None


def read_for_inspection(source: SourceFile, sources: StoreSettings) -> bytes | RaybatchError:
    """A file's bytes, or why they cannot be read; an outage of the store is waited out, and one
    past STORE_OUTAGE_BUDGET is the answer (StorageUnavailable: a rerun takes the file up)."""
    try:
        return read_source_patiently(source.uri, sources)
    except (InvalidSource, StorageUnavailable) as exc:
        return exc


def inspect_source(
    source: SourceFile,
    sources: StoreSettings,
    max_page_pixels: int,
    read: bytes | RaybatchError | None = None,
) -> Inspection:
    """Hash and open one file (no bytes kept): its bytes as ``read`` (read elsewhere, by a
    process that parses nothing), or read here."""
    data = read_for_inspection(source, sources) if read is None else read
    if isinstance(data, RaybatchError):
        return unread(source, data)  # no bytes, no content hash
    sha, size = sha256_bytes(data), len(data)
    try:
        kind = detect_kind(data)
        with open_source(data, kind, max_page_pixels=max_page_pixels) as doc:
            return Inspection(source, sha, size, kind, pages=doc.page_count)
    except InvalidSource as exc:
        return Inspection(source, sha, size, SourceKind.PDF, problem=exc)


def unread(source: SourceFile, problem: RaybatchError) -> Inspection:
    """The inspection of a file that could not be read: keyed by its URI, so a rerun finds the job."""
    digest = sha256_bytes(f"unreadable:{source.uri}".encode())
    return Inspection(source, digest, source.size, SourceKind.PDF, problem=problem)
