"""The S3 metadata codec (pure): any Unicode value survives ASCII headers or a sidecar."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raybatch.errors import StorageRejected
from raybatch.objects import s3meta

values = st.text(st.characters(exclude_categories=("Cs",)), max_size=3000)
names = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,20}", fullmatch=True).filter(
    lambda n: not n.startswith("raybatch-")
)


@given(values)
def test_values_round_trip_through_printable_ascii(value: str) -> None:
    encoded = s3meta.encode_value(value)

    assert encoded.isascii() and encoded.isprintable() and encoded == encoded.strip()
    assert s3meta.decode_value(encoded) == value


@given(st.dictionaries(names, values, max_size=6))
def test_metadata_round_trips_through_headers_or_sidecar(metadata: dict[str, str]) -> None:
    headers = s3meta.to_headers(metadata)

    if headers is None:
        assert s3meta.parse_sidecar(s3meta.sidecar_body(metadata)) == metadata
    else:
        assert sum(len(s3meta.HEADER_PREFIX + k) + len(v) for k, v in headers.items()) <= 1800
        sent = {s3meta.HEADER_PREFIX + k.upper(): v for k, v in headers.items()}
        assert s3meta.from_headers({**sent, "Content-Type": "x"}) == metadata


def test_too_large_metadata_needs_a_sidecar() -> None:
    assert s3meta.to_headers({"name": "x" * 1700}) is not None
    assert s3meta.to_headers({"name": "x" * 2000}) is None
    assert s3meta.to_headers({"name": "ж" * 300}) is None  # 6 encoded characters each


def test_sidecar_keys_are_deterministic_and_hidden() -> None:
    body = s3meta.sidecar_body({"b": "2", "a": "1"})

    assert body == s3meta.sidecar_body({"a": "1", "b": "2"})
    key = s3meta.sidecar_key("jobs/1/source", body)
    assert key.startswith(".raybatch-meta/jobs/1/source/") and key.endswith(".json")
    assert s3meta.sidecar_marker({"X-Amz-Meta-Raybatch-Sidecar": key}) == key
    assert s3meta.from_headers({"x-amz-meta-raybatch-sidecar": key}) == {}


@pytest.mark.parametrize(
    "marker", ["jobs/1/x", ".raybatch-meta/../x", ".raybatch-meta/", "../.raybatch-meta/a"]
)
def test_markers_outside_the_sidecar_folder_are_refused(marker: str) -> None:
    with pytest.raises(StorageRejected):
        s3meta.sidecar_marker({"x-amz-meta-raybatch-sidecar": marker})


@pytest.mark.parametrize("body", [b"not json", b"[]", b'{"metadata": {"a": 1}}', b'{"other": {}}'])
def test_bad_sidecars_are_refused(body: bytes) -> None:
    with pytest.raises(StorageRejected):
        s3meta.parse_sidecar(body)
