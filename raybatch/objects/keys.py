"""What the object store accepts, checked in one place before any storage is touched.

Keys are relative, ``/``-separated paths of safe segments (``[A-Za-z0-9._=-]``). Segments may not be
empty, ``.``, ``..`` or start with a dot: dot names are the stores' own (temp files, metadata
sidecars), so they never collide with a caller's key and stay hidden from ``list``.
User file names are never keys; they travel as metadata values, which may be any Unicode text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from raybatch.errors import InvalidObjectKey

MAX_KEY_CHARS = 512  # leaves room for a store prefix and sidecar names inside S3's 1024-byte limit
MAX_SEGMENT_CHARS = 200  # leaves room for temp and sidecar names inside a 255-byte file name
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_BYTES = 64 * 1024  # all keys and values, UTF-8; large values go to a sidecar on S3
MAX_CONTENT_TYPE_CHARS = 255
RESERVED_METADATA_PREFIX = "raybatch-"  # the stores' own metadata entries

_SEGMENT = re.compile(r"[A-Za-z0-9_=-][A-Za-z0-9._=-]*")
_PARTIAL_SEGMENT = re.compile(r"[A-Za-z0-9._=-]*")
# Lower case because S3 lower-cases metadata names; no dots, so every name is a plain header token.
_METADATA_KEY = re.compile(r"[a-z0-9][a-z0-9_-]*")
_CONTENT_TYPE = re.compile(r"[\x21-\x7e]+(?: [\x21-\x7e]+)*")


def validate_key(key: str) -> str:
    """The key itself when it is acceptable; InvalidObjectKey otherwise."""
    if not isinstance(key, str) or not key:
        raise InvalidObjectKey("object key must be a non-empty string")
    if len(key) > MAX_KEY_CHARS:
        raise InvalidObjectKey(f"object key longer than {MAX_KEY_CHARS} characters")
    for segment in key.split("/"):
        _check_segment(segment)
    return key


def _check_segment(segment: str) -> None:
    if not segment:
        raise InvalidObjectKey("object key has an empty segment (leading, trailing or double '/')")
    if len(segment) > MAX_SEGMENT_CHARS:
        raise InvalidObjectKey(f"object key segment longer than {MAX_SEGMENT_CHARS} characters")
    if not _SEGMENT.fullmatch(segment):
        raise InvalidObjectKey("object key segments use only A-Z a-z 0-9 . _ = - and do not start with '.'")


def validate_prefix(prefix: str) -> str:
    """A listing prefix: a key, a key followed by '/', a partial last segment, or ''."""
    if not isinstance(prefix, str):
        raise InvalidObjectKey("object prefix must be a string")
    if len(prefix) > MAX_KEY_CHARS:
        raise InvalidObjectKey(f"object prefix longer than {MAX_KEY_CHARS} characters")
    head, _, tail = prefix.rpartition("/")
    if head or prefix.startswith("/"):
        validate_key(head)
    if not _PARTIAL_SEGMENT.fullmatch(tail):
        raise InvalidObjectKey("object prefix uses only A-Z a-z 0-9 . _ = - and '/'")
    return prefix


def is_listable(key: str) -> bool:
    """True for a key a caller could have written (not a store's own dot file)."""
    try:
        validate_key(key)
    except InvalidObjectKey:
        return False
    return True


def listed(keys: Iterable[str], prefix: str) -> list[str]:
    """The keys a caller could have written that start with ``prefix``, sorted: what ``list`` yields."""
    return sorted(k for k in keys if k.startswith(prefix) and is_listable(k))


def validate_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    """A plain copy of acceptable metadata; InvalidObjectKey for bad names, types or sizes."""
    clean: dict[str, str] = {}
    total = 0
    for name, value in (metadata or {}).items():
        _check_metadata_name(name)
        if not isinstance(value, str):
            raise InvalidObjectKey(f"metadata value of {name!r} must be a string")
        try:
            total += len(name) + len(value.encode("utf-8"))
        except UnicodeEncodeError:
            raise InvalidObjectKey(f"metadata value of {name!r} is not valid Unicode text") from None
        clean[name] = value
    if total > MAX_METADATA_BYTES:
        raise InvalidObjectKey(f"metadata larger than {MAX_METADATA_BYTES} bytes")
    return clean


def _check_metadata_name(name: str) -> None:
    if not isinstance(name, str) or not _METADATA_KEY.fullmatch(name):
        raise InvalidObjectKey("metadata names use only a-z 0-9 _ - and start with a letter or digit")
    if len(name) > MAX_METADATA_KEY_CHARS:
        raise InvalidObjectKey(f"metadata name longer than {MAX_METADATA_KEY_CHARS} characters")
    if name.startswith(RESERVED_METADATA_PREFIX):
        raise InvalidObjectKey(f"metadata names starting with {RESERVED_METADATA_PREFIX!r} are reserved")


def validate_content_type(content_type: str) -> str:
    """A content type safe to send as one HTTP header value."""
    if (
        not isinstance(content_type, str)
        or len(content_type) > MAX_CONTENT_TYPE_CHARS
        or not _CONTENT_TYPE.fullmatch(content_type)
    ):
        raise InvalidObjectKey("content type must be printable ASCII on one line")
    return content_type
