"""User metadata on S3: any Unicode value, carried in ASCII headers or, when too large, a sidecar.

S3 metadata headers are ASCII and 2 KB in all, so every value is percent-encoded (UTF-8, nothing left
unescaped but ``A-Za-z0-9_.-~``). When the encoded metadata would not fit, it is written as a JSON
sidecar under ``.raybatch-meta/<key>/<sha256>.json`` and the object carries one header pointing to it.
The sidecar's name hashes its content, so rewriting the same metadata rewrites the same sidecar.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from urllib.parse import quote, unquote

from raybatch.errors import StorageRejected
from raybatch.objects.keys import RESERVED_METADATA_PREFIX, validate_key

HEADER_PREFIX = "x-amz-meta-"
HEADER_BUDGET = 1800  # bytes of names and values; S3 allows 2048 and counts its own overhead
SIDECAR_MARKER = f"{RESERVED_METADATA_PREFIX}sidecar"
SIDECAR_DIR = ".raybatch-meta"


def encode_value(value: str) -> str:
    """The value as header-safe ASCII."""
    return quote(value, safe="")


def decode_value(text: str) -> str:
    """The value ``encode_value`` was given."""
    return unquote(text, errors="strict")


def to_headers(metadata: Mapping[str, str]) -> dict[str, str] | None:
    """Encoded metadata for the object's headers, or None when it needs a sidecar."""
    encoded = {name: encode_value(value) for name, value in metadata.items()}
    size = sum(len(HEADER_PREFIX) + len(name) + len(value) for name, value in encoded.items())
    return encoded if size <= HEADER_BUDGET else None


def from_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Decoded user metadata from an object's response headers (the sidecar marker left out)."""
    metadata = {}
    for header, value in headers.items():
        name = header.lower()
        if name.startswith(HEADER_PREFIX) and not name[len(HEADER_PREFIX) :].startswith(
            RESERVED_METADATA_PREFIX
        ):
            metadata[name[len(HEADER_PREFIX) :]] = decode_value(value)
    return metadata


def sidecar_marker(headers: Mapping[str, str]) -> str | None:
    """The sidecar key an object's headers point to, if any; refused unless it is one of ours."""
    wanted = HEADER_PREFIX + SIDECAR_MARKER
    for header, value in headers.items():
        if header.lower() == wanted:
            return _checked_sidecar_key(value)
    return None


def _checked_sidecar_key(value: str) -> str:
    head, _, tail = value.partition("/")
    try:
        validate_key(tail)
    except ValueError:
        raise StorageRejected("object points to a malformed metadata sidecar") from None
    if head != SIDECAR_DIR:
        raise StorageRejected("object points to a metadata sidecar outside the store's own folder")
    return value


def sidecar_body(metadata: Mapping[str, str]) -> bytes:
    """The sidecar's JSON bytes (deterministic for the same metadata)."""
    return json.dumps({"metadata": dict(metadata)}, sort_keys=True, ensure_ascii=True).encode()


def parse_sidecar(body: bytes) -> dict[str, str]:
    """Metadata from a sidecar's bytes."""
    try:
        metadata = json.loads(body)["metadata"]
    except (ValueError, KeyError, TypeError):
        raise StorageRejected("metadata sidecar is not valid JSON") from None
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise StorageRejected("metadata sidecar has an unexpected shape")
    return metadata


def sidecar_folder(key: str) -> str:
    """Where the sidecars of ``key`` live (relative to the store's prefix), with a trailing '/'."""
    return f"{SIDECAR_DIR}/{key}/"


def sidecar_key(key: str, body: bytes) -> str:
    """The sidecar key of ``key`` for this body."""
    return f"{sidecar_folder(key)}{hashlib.sha256(body).hexdigest()}.json"
