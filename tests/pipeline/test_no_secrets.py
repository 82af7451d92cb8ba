"""A whole run leaves no API key and no page text in its output, its logs, its database or objects;
a prepare task never receives the API key, the database URL or the store's secret."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymupdf
import pytest
import ray
from needs import needs
from pipeline_support import run_settings
from ray import cloudpickle

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.ids import sha256_bytes
from raybatch.loops.scheduler import PrepareScheduler
from raybatch.models import JobRecord, JobStatus, PageText, SourceKind
from raybatch.ocr.tesseract import tesseract_available
from raybatch.samples import write_samples
from raybatch.settings import OcrEngineName, PrepareTaskSettings, StateSettings
from raybatch.shells import tasks
from raybatch.sources import SourceFile
from raybatch.state import open_state
from raybatch.steps.chunk import ChunkPlan
from raybatch.work.prepared_chunk import ChunkSummary

pytestmark = [pytest.mark.ray, pytest.mark.slow]

API_KEY = "raybatch-test-key-3f9c1e-not-a-real-one"


@pytest.fixture
def ray_tmp() -> Iterator[Path]:
    """A short folder for the run's own Ray (unix socket paths must stay short)."""
    folder = Path(tempfile.mkdtemp(prefix="rbs", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def every_file(*folders: Path) -> Iterator[Path]:
    for folder in folders:
        yield from (p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def test_no_key_and_no_page_text_anywhere(tmp_path: Path, ray_tmp: Path) -> None:
    truth = write_samples(tmp_path / "in", bundles=1, seed=11)
    page_phrases = ["Перечисленные ниже услуги", "The goods shall be accompanied", "Заказчик претензий"]
    counterparties = {d["counterparty"] for b in truth["bundles"] for d in b["documents"]}
    with EmulatorServer(EmulatorConfig(api_key=API_KEY, processing_seconds=0.2)) as emulator:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")},
            "ANTHROPIC_API_KEY": API_KEY,
            "ANTHROPIC_BASE_URL": emulator.base_url,
            "OCR_ENGINE": "none",
            "POLL_INTERVAL": "0.5",
            "RAY_TMPDIR": str(ray_tmp),
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_AUTH_MODE": "disabled",
        }
        home = tmp_path / "home"
        command = [sys.executable, "-m", "raybatch.cli", "-v", "run", str(tmp_path / "in"), "--quiet"]
        command += [
            "--no-dashboard",
            "--db",
            f"sqlite:///{home / 'state.db'}",
            "--store",
            str(home / "store"),
        ]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    logs = [p for p in every_file(ray_tmp) if p.suffix in {".log", ".out", ".err"}]
    assert len(logs) > 10  # the run's own Ray wrote its logs where we look
    outputs = [done.stdout, done.stderr, *(p.read_bytes().decode("utf-8", "replace") for p in logs)]
    stored = [p.read_bytes() for p in every_file(home)]
    assert not any(API_KEY in text for text in outputs), "the key reached a log"
    assert not any(API_KEY.encode() in data for data in stored), "the key reached the database or a store"
    for phrase in page_phrases:
        assert not any(phrase in text for text in outputs), f"page text reached a log: {phrase}"
    assert counterparties  # fields are stored (rows, manifests), but never logged
    assert not any(name in text for name in counterparties for text in outputs)


DB_PASSWORD = "db-pass-3f9c1e-not-a-real-one"
STORE_SECRET = "minio-secret-3f9c1e-not-a-real-one"


@ray.remote(num_returns=2)
def _spy_prepare(*args: object) -> tuple[bytes, str]:
    """Stands in for prepare_chunk: reports what the task received, as a worker sees it (all but
    the source's bytes, which here are what the load spy reported)."""
    return cloudpickle.dumps(args[:3] + args[4:]), type(args[0]).__name__


@ray.remote(num_returns=2)
def _spy_prepare_whole(*args: object) -> tuple[bytes, str]:
    """As ``_spy_prepare``, with every argument (for a task given no source bytes)."""
    return cloudpickle.dumps(args), type(args[0]).__name__


@ray.remote
def _spy_load(*args: object) -> bytes:
    return cloudpickle.dumps(args)


def _register_pdf(state, path: Path, data: bytes) -> JobRecord:  # type: ignore[no-untyped-def]
    """Write ``data`` to ``path`` and register it as a pending job."""
    path.write_bytes(data)
    job, _ = state.register_job(
        sha256=sha256_bytes(data),
        source_uri=path.as_uri(),
        source_name=path.name,
        kind=SourceKind.PDF,
        size_bytes=len(data),
    )
    return job


def _one_page_job(state, path: Path) -> JobRecord:  # type: ignore[no-untyped-def]
    with pymupdf.open() as doc:
        doc.new_page().insert_text((72, 72), "Invoice 7 from ACME")
        data = doc.tobytes()
    return _register_pdf(state, path, data)


def test_a_prepare_task_cannot_read_the_api_key(
    ray_session: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_password = f"postgresql+psycopg://raybatch:{DB_PASSWORD}@db.invalid/raybatch"
    settings = run_settings(
        tmp_path,
        anthropic_api_key=API_KEY,
        database_url=with_password,
        s3_secret_key=STORE_SECRET,
    )
    # The driver's own database handle (the URL above is never connected to).
    state = open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'state.db'}"))
    job = _one_page_job(state, tmp_path / "a.pdf")
    state.put_page_text(job.sha256, "x-1", PageText(1, "read before", "ocr:x"))

    monkeypatch.setattr(tasks, "prepare_chunk", _spy_prepare)
    monkeypatch.setattr(tasks, "load_source", _spy_load)
    prepare_tasks = tasks.RayPrepareTasks(settings, cache=state)
    source = prepare_tasks.load(job)
    received, kind = ray.get(list(prepare_tasks.prepare(job, ChunkPlan(0, 1, 1), source)))
    assert kind == PrepareTaskSettings.__name__
    for secret in (API_KEY, DB_PASSWORD, STORE_SECRET, "db.invalid"):
        assert secret.encode() not in received, secret
    assert b"read before" in received  # the OCR cache came from the driver, not from a database
    loaded = ray.get(source)
    assert API_KEY.encode() not in loaded and DB_PASSWORD.encode() not in loaded
    assert STORE_SECRET.encode() in loaded  # reading an S3 source needs the store's keys
    # A job's only chunk: its task reads a local source itself, and gets no key at all.
    monkeypatch.setattr(tasks, "prepare_chunk", _spy_prepare_whole)
    reading, _ = ray.get(list(prepare_tasks.prepare(job, ChunkPlan(0, 1, 1), None)))
    for secret in (API_KEY, DB_PASSWORD, STORE_SECRET):
        assert secret.encode() not in reading, secret

    monkeypatch.undo()  # the real tasks prepare the chunk with no more than that
    text_layers_only = settings.model_copy(update={"ocr_engine": OcrEngineName.NONE})
    prepare_tasks = tasks.RayPrepareTasks(text_layers_only, cache=state)
    summary, _ = prepare_tasks.prepare(job, ChunkPlan(0, 1, 1), prepare_tasks.load(job))
    assert ray.get(summary).record.custom_id == f"job_{job.id}_batch_0"


PEEK = """
import os, sys, ray
from raybatch.shells.runtime import connect
from raybatch.settings import load_settings
assert connect(load_settings(raybatch_home=sys.argv[1]), dashboard=False)

@ray.remote
def task():
    return os.environ.get("ANTHROPIC_API_KEY"), os.environ.get("DATABASE_URL")

@ray.remote
class Actor:
    def peek(self):
        return os.environ.get("ANTHROPIC_API_KEY"), os.environ.get("DATABASE_URL")

print(ray.get(task.remote()), ray.get(Actor.remote().peek.remote()))
ray.shutdown()
"""


def test_workers_of_a_local_ray_do_not_inherit_secret_variables(tmp_path: Path, ray_tmp: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")},
        "ANTHROPIC_API_KEY": API_KEY,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'state.db'}?password={DB_PASSWORD}",
        "RAY_TMPDIR": str(ray_tmp),
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "disabled",
    }
    command = [sys.executable, "-c", PEEK, str(tmp_path)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "('', '') ('', '')"


def _scanned_page_job(state, path: Path) -> JobRecord:  # type: ignore[no-untyped-def]
    """A one-page PDF whose only content is an image of text: it needs OCR."""
    with pymupdf.open() as text_doc:
        text_doc.new_page().insert_text((72, 144), "INVOICE 7 ACME LIMITED", fontsize=28)
        png = text_doc[0].get_pixmap(dpi=150).tobytes("png")
    with pymupdf.open() as doc:
        page = doc.new_page()
        page.insert_image(page.rect, stream=png)
        data = doc.tobytes()
    job = _register_pdf(state, path, data)
    state.transition(job.id, [JobStatus.PENDING], JobStatus.PENDING, pages=1)
    return job


@needs(tesseract_available("eng"), "no Tesseract with English on this machine")
def test_the_ocr_cache_works_through_the_driver(ray_session: None, tmp_path: Path) -> None:
    settings = run_settings(tmp_path, ocr_engine="tesseract", ocr_languages="eng")
    state = open_state(settings.section(StateSettings))
    job = _scanned_page_job(state, tmp_path / "scan.pdf")

    summaries: list[Any] = []

    class Recording(tasks.RayPrepareTasks):
        def prepare(self, job: JobRecord, plan: ChunkPlan, source: Any) -> tuple[Any, Any]:
            summary, payload = super().prepare(job, plan, source)
            summaries.append(summary)
            return summary, payload

    def prepare_once() -> ChunkSummary:
        launcher = Recording(settings, cache=state)
        scheduler = PrepareScheduler(
            state,
            launcher,
            worker_id="t",
            max_in_flight=1,
            max_backlog_bytes=1 << 40,
            lease_seconds=60,
            max_attempts=3,
        )
        scheduler.claim([job.id])
        while not scheduler.tick(0):
            time.sleep(0.1)
        return ray.get(summaries[-1])

    first = prepare_once()
    assert [read.text.page for read in first.ocr_reads] == [1]  # read in the task, stored by the driver
    [cached] = state.cached_page_texts(job.sha256, [1])
    assert "ACME" in cached.text.text.upper()
    state.transition(job.id, [JobStatus.PREPARED], JobStatus.PENDING)
    again = prepare_once()
    assert again.ocr_reads == () and again.ocr_pages == 1  # the page came from the cache


@ray.remote
def _spy_inspect(*args: object) -> bytes:
    """Stands in for inspect_files: reports what the task received, the bytes read included."""
    return cloudpickle.dumps(args)


@ray.remote
def _spy_read(*args: object) -> list[bytes]:
    """Stands in for read_files: the task that holds the store's keys, and parses nothing."""
    return [cloudpickle.dumps(args)]


def test_a_registration_task_parsing_an_s3_file_holds_no_key(
    ray_session: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = run_settings(tmp_path, anthropic_api_key=API_KEY, minio_secret_key=STORE_SECRET)
    monkeypatch.setattr(tasks, "inspect_files", _spy_inspect)
    monkeypatch.setattr(tasks, "read_files", _spy_read)
    source = SourceFile("s3://inbox/scans/a.pdf", "a.pdf", 10)
    for urgent in (False, True):
        parsing = ray.get(tasks.RayInspector(settings, urgent=urgent).inspect([source]))
        assert STORE_SECRET.encode() in parsing, "the bytes it got came from a reader holding the keys"
        seen = cloudpickle.loads(parsing)
        assert STORE_SECRET.encode() not in cloudpickle.dumps(seen[:3]), "its own arguments hold none"
        assert API_KEY.encode() not in parsing
