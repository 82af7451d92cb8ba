"""Shared fixtures. Services that are missing skip locally and fail under CI (CI=true)."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from needs import missing_service

# Ray reads these at import and init time; tests never report usage or ask for tokens.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

DEFAULT_TEST_PG = "postgresql+psycopg://raybatch:raybatch@127.0.0.1:5432/raybatch_test"


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """URL of the real PostgreSQL server the tests use (RAYBATCH_TEST_DATABASE_URL)."""
    url = os.environ.get("RAYBATCH_TEST_DATABASE_URL", DEFAULT_TEST_PG)
    import sqlalchemy as sa

    try:
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        engine.dispose()
    except Exception as exc:  # any failure to reach the server
        missing_service(f"PostgreSQL not reachable at {url.split('@')[-1]}: {type(exc).__name__}")
    return url


@dataclasses.dataclass(frozen=True)
class S3Server:
    """moto's S3-protocol server on loopback: where it listens and the (dummy) credentials it takes."""

    endpoint: str  # "127.0.0.1:PORT", as the minio SDK wants it
    access_key: str = "raybatch-test"
    secret_key: str = "raybatch-test-secret"
    region: str = "us-east-1"
    # The access key id that signed each request, in order (None: unsigned), for the credential tests.
    signed_by: list[str | None] = dataclasses.field(default_factory=list)

    def client(self):
        """A minio client for this server."""
        from minio import Minio

        return Minio(
            self.endpoint,
            access_key=self.access_key,
            secret_key=self.secret_key,
            secure=False,
            region=self.region,
        )

    def new_bucket(self, stem: str = "rb") -> str:
        """Create a fresh, empty bucket and return its name."""
        name = f"{stem}-{uuid.uuid4().hex[:16]}"
        self.client().make_bucket(name, location=self.region)
        return name

    def store_settings(self, bucket: str, prefix: str = ""):
        """StoreSettings pointing at ``s3://bucket/prefix`` on this server."""
        from raybatch.settings import StoreSettings

        return StoreSettings(
            store=f"s3://{bucket}/{prefix}".rstrip("/"),
            s3_endpoint=self.endpoint,
            s3_access_key=self.access_key,
            s3_secret_key=self.secret_key,
            s3_secure=False,
            s3_region=self.region,
        )


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """An S3-protocol server (moto, in a thread) on 127.0.0.1 and a free port, for the whole session."""
    try:
        from moto.server import ThreadedMotoServer
    except ImportError as exc:
        missing_service(f"moto[server] is not installed: {exc}")
    werkzeug_log = logging.getLogger("werkzeug")
    level = werkzeug_log.level
    werkzeug_log.setLevel(logging.WARNING)  # one line per request otherwise
    signed_by: list[str | None] = []
    server = _signatures_kept(ThreadedMotoServer, signed_by)(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield S3Server(endpoint=f"{host}:{port}", signed_by=signed_by)
    finally:
        server.stop()
        werkzeug_log.setLevel(level)


def _signatures_kept(threaded_server: type, signed_by: list[str | None]) -> type:
    """moto's threaded server, its app behind a layer that notes which access key signed each request."""
    from moto.moto_server import threaded_moto_server as moto_threads  # its werkzeug make_server

    app = moto_threads.DomainDispatcherApplication(moto_threads.create_backend_app)

    def noted(environ: dict[str, Any], start_response: Any) -> Any:
        match = re.search(r"Credential=([^/,\s]+)/", environ.get("HTTP_AUTHORIZATION", ""))
        signed_by.append(match.group(1) if match else None)
        return app(environ, start_response)

    class SignaturesKept(threaded_server):  # type: ignore[misc,valid-type]
        def _server_entry(self) -> None:  # as moto's own, with ``noted`` in front of its app
            self._server = moto_threads.make_server(
                self._ip_address, self._port, noted, True, request_handler=moto_threads.MotoRequestHandler
            )
            self._server_ready_event.set()
            self._server.serve_forever()

    return SignaturesKept


@pytest.fixture
def db(tmp_path: Path) -> str:
    """The URL of a SQLite state database in the test's own folder (created on first use)."""
    return f"sqlite:///{tmp_path / 'state.db'}"


@pytest.fixture
def state(db: str) -> Any:
    """A fresh SQLite state database of the test's own (a ``SqlStateStore``), at ``db``."""
    from raybatch.settings import StateSettings
    from raybatch.state import open_state

    return open_state(StateSettings(database_url=db))


@pytest.fixture
def emulator(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The Claude emulator on loopback (an ``EmulatorServer``). Its batches end at once; in a
    pipeline run on Ray (tests marked ``ray``) after half a second, so the run sees them in flight."""
    from raybatch.claude.emulator import EmulatorConfig, EmulatorServer

    seconds = 0.5 if request.node.get_closest_marker("ray") else 0.0
    with EmulatorServer(EmulatorConfig(processing_seconds=seconds)) as server:
        yield server


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (``@pytest.mark.anyio``) run on asyncio, as the coordinator does."""
    return "asyncio"
