"""The in-memory fake's extras, and open_store choosing an implementation from the settings."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from raybatch.errors import ConfigError, StorageUnavailable
from raybatch.objects import LocalObjectStore, MemoryObjectStore, MinioObjectStore, open_store
from raybatch.settings import StoreSettings


def test_injected_failures_hit_the_next_operations_in_order() -> None:
    store = MemoryObjectStore()
    store.fail_next(StorageUnavailable("one"), StorageUnavailable("two"))

    with pytest.raises(StorageUnavailable, match="one"):
        store.put("k", b"x")
    with pytest.raises(StorageUnavailable, match="two"):
        store.get("k")
    store.put("k", b"x")
    assert store.get("k") == b"x"


def test_a_pickled_memory_store_is_an_independent_snapshot() -> None:
    store = MemoryObjectStore("snap")
    store.put("k", b"1")
    copy = pickle.loads(pickle.dumps(store))

    copy.put("k", b"2")

    assert (store.get("k"), copy.get("k")) == (b"1", b"2")
    assert copy.uri("k") == "memory://snap/k"


def test_open_store_picks_a_folder(tmp_path: Path) -> None:
    store = open_store(StoreSettings(store=str(tmp_path / "out")))

    assert store == LocalObjectStore(tmp_path / "out")
    assert open_store(StoreSettings(store=f"file://{tmp_path}/out%20x")) == LocalObjectStore(
        tmp_path / "out x"
    )


def test_open_store_picks_s3_without_touching_the_network() -> None:
    settings = StoreSettings(
        store="s3://raybatch/runs/1",
        s3_endpoint="minio.internal:9000",
        s3_secret_key="k",
        s3_access_key="a",
    )
    store = open_store(settings)

    assert isinstance(store, MinioObjectStore)
    assert store.uri("jobs/1/manifest.json") == "s3://raybatch/runs/1/jobs/1/manifest.json"
    assert "s3cr3t-XYZ" not in repr(store) and "s3cr3t-XYZ" not in str(vars(store))


@pytest.mark.parametrize("target", ["", "  ", "gs://bucket/x", "http://host/x", "s3://B/x"])
def test_open_store_refuses_what_it_cannot_serve(target: str) -> None:
    with pytest.raises(ConfigError):
        open_store(StoreSettings(store=target))
