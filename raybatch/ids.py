"""Deterministic identities: custom ids, processing keys and object keys come from ids and hashes,
never from user file names."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from raybatch.units import MIB

CUSTOM_ID_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_CUSTOM_ID = re.compile(r"^job_(\d+)_batch_(\d+)$")


def custom_id(job_id: int, n: int) -> str:
    """Claude's custom_id for chunk ``n`` of job ``job_id``: ``job_{id}_batch_{n}``."""
    return f"job_{job_id}_batch_{n}"


def parse_custom_id(value: str) -> tuple[int, int] | None:
    """(job_id, n) from a custom_id we made, or None for anything else."""
    match = _CUSTOM_ID.match(value)
    return (int(match.group(1)), int(match.group(2))) if match else None


_MARKED = re.compile(r"^(.+)-([0-9a-f]{8,12})$")


def marked_custom_id(value: str, database_id: str) -> str:
    """The custom_id a batch request is sent under: the chunk's, marked with its database
    (``job_1_batch_0-3f2a9c01b7d4``). Job numbers repeat across databases; the mark keeps a batch
    that another database made on the same workspace from being taken for ours."""
    return f"{value}-{database_id[:12]}"


def unmarked_custom_id(sent: str, database_id: str) -> str | None:
    """The chunk's custom_id behind a result's: the mark taken off when it is this database's,
    the id as it is when unmarked (sent before marks existed), None for another database's mark."""
    match = _MARKED.match(sent)
    if match is None:
        return sent
    return match.group(1) if match.group(2) == database_id[:12] else None


def processing_key(sha256: str, n: int, request_config: str) -> str:
    """What makes one chunk's answer reusable: same bytes, same chunk, and the same request
    configuration (``RequestConfig.fingerprint``: model, prompt, modality, OCR engine, images...)."""
    raw = f"{sha256}:{n}:{request_config}".encode()
    return hashlib.sha256(raw).hexdigest()


def sha256_file(path: str | Path, block: int = MIB) -> str:
    """Hex sha256 of a file, read in blocks."""
    with open(path, "rb") as handle:
        return sha256_stream(handle, block)


def sha256_stream(stream: BinaryIO, block: int = MIB) -> str:
    """Hex sha256 of a binary stream, read in blocks."""
    digest = hashlib.sha256()
    while chunk := stream.read(block):
        digest.update(chunk)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class OutputKeys:
    """Object keys of one state database's outputs, all under ``db-<id>/``.

    Job ids restart at 1 in every database, so the database's own identity (a random id stored in it
    on first use, ``StateStore.database_id``) keeps the outputs of databases that share a store apart:
    one never overwrites or deletes another's objects.
    """

    database_id: str

    def __post_init__(self) -> None:
        if not _DATABASE_ID.fullmatch(self.database_id):
            raise ValueError("a database id is 8 to 64 lower-case hex digits")

    @property
    def root(self) -> str:
        """The prefix of every output of this database."""
        return f"db-{self.database_id[:16]}"

    @property
    def jobs(self) -> str:
        """The listing prefix of every job's outputs."""
        return f"{self.root}/jobs/"

    def job_prefix(self, job_id: int) -> str:
        """Object-key prefix of one job's outputs."""
        return f"{self.jobs}{job_id}"

    def document_pdf(self, job_id: int, index: int, version: int = 1) -> str:
        """Key of document ``index`` of a job, as its own PDF (``<n>.v<k>.pdf`` from version 2)."""
        return f"{self.job_prefix(job_id)}/documents/{index}{_version(version)}.pdf"

    def document_thumb(self, job_id: int, index: int, version: int = 1) -> str:
        """Key of the thumbnail of document ``index`` of a job (``<n>.v<k>.webp`` from version 2)."""
        return f"{self.job_prefix(job_id)}/documents/{index}{_version(version)}.webp"

    def document_text(self, job_id: int, index: int, version: int = 1) -> str:
        """Key of the text (its text layer, else its OCR) of document ``index`` of a job
        (``<n>.v<k>.txt`` from version 2)."""
        return f"{self.job_prefix(job_id)}/documents/{index}{_version(version)}.txt"

    def manifest(self, job_id: int) -> str:
        """Key of a job's manifest.json."""
        return f"{self.job_prefix(job_id)}/manifest.json"

    def prepared(self, job_id: int) -> str:
        """The listing prefix of a job's requests prepared ahead (by ``estimate``)."""
        return f"{self.job_prefix(job_id)}/prepared/"

    def prepared_request(self, job_id: int, n: int) -> str:
        """Key of chunk ``n`` of a job, prepared ahead."""
        return f"{self.prepared(job_id)}{n}.json"

    def source(self, job_id: int) -> str:
        """Key of a source file copied into the store (sources that are not already in it)."""
        return f"{self.job_prefix(job_id)}/source"

    @property
    def spool(self) -> str:
        """The listing prefix of the answers the coordinator could not file while the database was away."""
        return f"{self.root}/spool/"

    def spooled_answer(self, job_id: int, n: int) -> str:
        """Key of the answer to chunk ``n`` of a job, kept until the database files it."""
        return f"{self.spool}{custom_id(job_id, n)}.json"

    @property
    def documents_table(self) -> str:
        """Prefix of this database's Parquet table of documents (``raybatch.steps.table_files``)."""
        return f"{self.root}/tables/documents"


_DATABASE_ID = re.compile(r"[0-9a-f]{8,64}")


def _version(version: int) -> str:
    """A document version's part of its keys: none for the first (today's keys), ``.v<k>`` after."""
    return "" if version == 1 else f".v{version}"
