"""Outages of the real services mid-run: the PostgreSQL server is stopped for 30 s and the S3 server
for 60 s while a batch is in flight; the run waits them out and ends with every job completed,
each chunk paid once and each document written once.

This test stops and starts the PostgreSQL cluster itself (``pg_ctlcluster``), as CI starts it:
it runs alone in its process's test session, so no other test meets the outage.
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from needs import missing_service
from pipeline_support import chunk_answers, run_settings
from waiting import wait_for

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.ids import OutputKeys
from raybatch.models import JobStatus
from raybatch.objects import open_store
from raybatch.pipeline import RunReport, run
from raybatch.samples import write_samples
from raybatch.settings import StateSettings, StoreSettings
from raybatch.state import open_state

pytestmark = [pytest.mark.postgres, pytest.mark.ray, pytest.mark.slow]

DATABASE_DOWN_SECONDS = 30.0
STORE_DOWN_SECONDS = 60.0
S3_KEYS = {"s3_access_key": "raybatch-test", "s3_secret_key": "raybatch-test-secret"}


class Postgres:
    """The local PostgreSQL cluster, stopped and started with ``pg_ctlcluster``."""

    def __init__(self) -> None:
        versions = sorted(Path("/etc/postgresql").glob("*/main"), key=lambda p: float(p.parent.name))
        if not versions:  # CI installs and starts one: there, a missing cluster fails the test
            reason = "no PostgreSQL cluster to restart (/etc/postgresql/*/main)"
            missing_service(reason)
        self.version = versions[-1].parent.name

    def _ctl(self, action: str, *, check: bool = True) -> None:
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", self.version, "main", action],
            check=check,
            capture_output=True,
            timeout=120,
        )

    def stop(self) -> None:
        self._ctl("stop")

    def start(self) -> None:
        self._ctl("start", check=False)  # fails when it is running already
        for _ in range(60):
            if subprocess.run(["pg_isready", "-h", "127.0.0.1", "-q"], check=False).returncode == 0:
                return
            time.sleep(1)


class S3:
    """moto's S3 server on a fixed port of its own, stopped and started again (its buckets live on)."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._make = ThreadedMotoServer
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, self.port = self._server.get_host_and_port()
        self.endpoint = f"{host}:{self.port}"
        self.up = True

    def stop(self) -> None:
        self._server.stop()
        self.up = False

    def start(self) -> None:
        self._server = self._make(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        self.up = True


@pytest.fixture
def schema_url(postgres_url: str) -> Iterator[str]:
    schema = f"outage_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(postgres_url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    admin.dispose()
    url = sa.make_url(postgres_url).update_query_dict({"options": f"-csearch_path={schema}"})
    yield url.render_as_string(hide_password=False)
    admin = sa.create_engine(postgres_url)
    with admin.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


def test_a_database_restart_and_a_store_outage_mid_run_are_waited_out(
    ray_session: None, schema_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per S3 request otherwise
    postgres, s3 = Postgres(), S3()
    bucket = "outage"
    from minio import Minio

    Minio(
        s3.endpoint,
        secure=False,
        region="us-east-1",
        access_key=S3_KEYS["s3_access_key"],
        secret_key=S3_KEYS["s3_secret_key"],
    ).make_bucket(bucket, location="us-east-1")
    truth = write_samples(tmp_path / "in", bundles=2, seed=11)
    # Batches end 3 s after their create: while the database is away, so their answers are filed
    # once it is back and written while the store is still away.
    with EmulatorServer(EmulatorConfig(processing_seconds=3.0)) as emulator:
        settings = run_settings(
            tmp_path / "home",
            emulator,
            database_url=schema_url,
            store=f"s3://{bucket}/results",
            s3_endpoint=s3.endpoint,
            s3_secure=False,
            s3_region="us-east-1",
            ocr_engine="none",
            lease_seconds=30.0,
            **S3_KEYS,
        )
        state = open_state(settings.section(StateSettings))
        outcome: dict[str, Any] = {}

        def drive() -> None:
            try:
                outcome["report"] = run(settings, str(tmp_path / "in"))
            except BaseException as exc:  # the test thread reports it
                outcome["error"] = exc

        runner = threading.Thread(target=drive, name="outage-run", daemon=True)
        database_down = False
        try:
            with caplog.at_level(logging.WARNING, logger="raybatch"):
                runner.start()
                wait_for(lambda: bool(state.list_jobs([JobStatus.SUBMITTED])), 300, "a batch in flight")
                state.close()
                s3.stop()
                postgres.stop()
                database_down = True
                down_at = time.monotonic()
                time.sleep(DATABASE_DOWN_SECONDS)
                assert runner.is_alive() and "error" not in outcome, "the run survives the database outage"
                postgres.start()
                database_down = False
                time.sleep(max(0.0, STORE_DOWN_SECONDS - (time.monotonic() - down_at)))
                assert runner.is_alive() and "error" not in outcome, "the run survives the store outage"
                s3.start()
                store_back = time.time()
                runner.join(timeout=600)
        finally:
            if database_down:
                postgres.start()
            if not s3.up:
                s3.start()
        assert not runner.is_alive(), "the run ends by itself"
        assert "error" not in outcome, f"the run failed: {outcome.get('error')!r}"
        paid = chunk_answers(emulator.app.answers())

    report: RunReport = outcome["report"]
    assert report.ok and {j.status for j in report.jobs} == {JobStatus.COMPLETED}
    assert any("state database unavailable" in r.getMessage() for r in caplog.records), (
        "the database outage was met and said"
    )
    state = open_state(settings.section(StateSettings))
    chunks = [c for job in report.jobs for c in state.get_chunks(job.id)]
    assert paid and set(paid.values()) == {1}, f"each chunk paid once: {paid}"
    assert set(paid) == {c.custom_id for c in chunks}
    rows = state.list_documents()
    keys = set(open_store(settings.section(StoreSettings)).list(f"{OutputKeys(state.database_id()).root}/"))
    pdfs = {k for k in keys if k.endswith(".pdf")}
    assert pdfs == {d.pdf_key for d in rows}, "one PDF per row, none missing"
    assert len(report.jobs) == len(truth["bundles"])
    assert any(w.started < store_back < w.ended and w.status is JobStatus.COMPLETED for w in report.writes), (
        "a write waited out the store outage and completed"
    )
