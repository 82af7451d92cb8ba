"""Key, prefix, metadata and content-type validation (pure)."""

from __future__ import annotations

import pytest

from raybatch import ids
from raybatch.errors import InvalidObjectKey
from raybatch.objects.keys import (
    MAX_KEY_CHARS,
    is_listable,
    validate_content_type,
    validate_key,
    validate_metadata,
    validate_prefix,
)

KEYS = ids.OutputKeys("0123456789abcdef0123456789abcdef")


@pytest.mark.parametrize(
    "key",
    [
        KEYS.document_pdf(12, 3),
        KEYS.document_thumb(12, 3),
        KEYS.manifest(1),
        KEYS.source(99),
        KEYS.document_text(12, 3),
        f"{KEYS.documents_table}/part-20261201T000000000000Z-0123456789ab.parquet",
        "a",
        "a.b-c_d=e/F0",
        "x" * 200,
        "/".join(["abc"] * 128),
    ],
)
def test_keys_built_from_ids_are_valid(key: str) -> None:
    assert validate_key(key) == key
    assert is_listable(key)


@pytest.mark.parametrize(
    "key",
    [
        "",
        "/a",
        "a/",
        "a//b",
        ".",
        "..",
        "a/./b",
        "a/../b",
        "../../etc/x",
        ".a",
        "a/.b",
        "a\\b",
        "a b",
        "ä",
        "a\nb",
        "x" * 201,
        "/".join(["abc"] * 129),
        None,
        5,
    ],
)
def test_other_keys_are_refused(key) -> None:
    with pytest.raises(InvalidObjectKey):
        validate_key(key)
    assert isinstance(InvalidObjectKey("x"), ValueError)


def test_key_length_is_bounded() -> None:
    assert len("/".join(["abc"] * 129)) > MAX_KEY_CHARS >= len("/".join(["abc"] * 128))


@pytest.mark.parametrize("prefix", ["", "jobs", "jobs/", "jobs/1", "jobs/1/", "jobs/1/doc", "jobs/."])
def test_prefixes(prefix: str) -> None:
    assert validate_prefix(prefix) == prefix


@pytest.mark.parametrize("prefix", ["/", "/jobs", "jobs//", "../", "a/../", "a b", "a\\", ".x/", 3])
def test_bad_prefixes(prefix) -> None:
    with pytest.raises(InvalidObjectKey):
        validate_prefix(prefix)


def test_metadata_is_copied_and_checked() -> None:
    original = {"source_name": "../../etc/x", "n-2": ""}
    clean = validate_metadata(original)

    assert clean == original and clean is not original
    assert validate_metadata(None) == {}


def test_metadata_size_is_bounded() -> None:
    validate_metadata({"a": "ж" * 30_000})
    with pytest.raises(InvalidObjectKey):
        validate_metadata({"a": "ж" * 40_000})


@pytest.mark.parametrize("content_type", ["application/pdf", "text/plain; charset=utf-8", "image/webp"])
def test_content_types(content_type: str) -> None:
    assert validate_content_type(content_type) == content_type


@pytest.mark.parametrize("content_type", ["", " x", "x ", "a\tb", "a\r\nb", "тип", None])
def test_bad_content_types(content_type) -> None:
    with pytest.raises(InvalidObjectKey):
        validate_content_type(content_type)
