"""One object-store fixture over every implementation: the fake, a folder, and S3 (moto via minio)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from raybatch.objects import LocalObjectStore, MemoryObjectStore, MinioObjectStore, ObjectStore

# Stands in for time.sleep: a builtin that ignores its argument's meaning and pickles anywhere
# (a function defined in a conftest does not: every conftest module is called "conftest").
_no_sleep = abs


@pytest.fixture
def make_s3_store(s3_server) -> Callable[..., MinioObjectStore]:
    """Build stores on the loopback S3 server (a fresh bucket unless one is given)."""

    def make(bucket: str | None = None, prefix: str = "", **options) -> MinioObjectStore:
        options.setdefault("sleep", _no_sleep)
        return MinioObjectStore(
            bucket or f"rb-{uuid.uuid4().hex[:16]}",
            prefix,
            endpoint=s3_server.endpoint,
            access_key=s3_server.access_key,
            secret_key=s3_server.secret_key,
            secure=False,
            region=s3_server.region,
            **options,
        )

    return make


@pytest.fixture(scope="session")
def shared_bucket(s3_server) -> str:
    """One bucket for the contract suite; each test takes its own prefix in it."""
    return s3_server.new_bucket("contract")


@pytest.fixture(params=["memory", "local", "s3"])
def store(request, tmp_path: Path) -> ObjectStore:
    """Each implementation in turn, empty."""
    if request.param == "memory":
        return MemoryObjectStore()
    if request.param == "local":
        return LocalObjectStore(tmp_path / "root")
    bucket = request.getfixturevalue("shared_bucket")
    make = request.getfixturevalue("make_s3_store")
    return make(bucket, prefix=f"t-{uuid.uuid4().hex[:12]}/under", create_bucket=False)


@pytest.fixture
def kind(store: ObjectStore) -> str:
    """Which implementation ``store`` is."""
    return type(store).__name__
