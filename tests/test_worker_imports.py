"""What a Ray worker of raybatch loads: only what its work needs (each worker pays every import)."""

from __future__ import annotations

import json
import subprocess
import sys

UNUSED = ("pymupdf.layout", "pymupdf4llm", "onnxruntime", "minio")  # layout analysis, an S3 SDK


def _loaded_after(code: str, modules: tuple[str, ...] = UNUSED) -> dict[str, object]:
    loaded = f"{{m: sys.modules.get(m) is not None for m in {modules!r}}}"  # None: left out
    probe = f"{code}\nimport json, sys\nprint(json.dumps({loaded}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[-1])


def test_writers_and_prepare_tasks_leave_out_layout_analysis_and_the_s3_sdk() -> None:
    loaded = _loaded_after("import raybatch.shells.writers, raybatch.shells.tasks, raybatch.work.prepare")
    assert not any(loaded.values()), loaded


def test_the_coordinator_reads_prepared_chunks_without_a_pdf_renderer() -> None:
    code = (
        "import pickle, raybatch.shells.runtime\n"
        "from raybatch.claude.records import PreparedRequest\n"
        "from raybatch.work.prepared_chunk import PreparedChunk\n"
        "request = PreparedRequest('job_1_batch_0', 1, 0, 1, 8, 'key', '{}', 10, 1)\n"
        "pickle.loads(pickle.dumps(PreparedChunk(request, {1: 0})))"
    )
    assert _loaded_after(code, ("pymupdf", "raybatch.work.prepare")) == {
        "pymupdf": False,
        "raybatch.work.prepare": False,
    }


def test_registration_and_prepare_tasks_load_no_database_driver() -> None:
    """A task worker only reads and parses files: the driver records what it found (SQLAlchemy
    alone is a sixth of a second of each task worker's start)."""
    code = "import raybatch.shells.tasks"
    assert _loaded_after(code, ("sqlalchemy", "raybatch.state")) == {
        "sqlalchemy": False,
        "raybatch.state": False,
    }


def test_pymupdf_still_reads_text_after_raybatch_left_its_layout_out() -> None:
    code = (
        "import raybatch, pymupdf\n"
        "doc = pymupdf.open(); page = doc.new_page(); page.insert_text((72, 72), 'Invoice 7')\n"
        "assert pymupdf.open('pdf', doc.tobytes())[0].get_text().strip() == 'Invoice 7'"
    )
    assert not _loaded_after(code)["pymupdf.layout"]


def test_an_s3_store_loads_the_sdk_when_asked_for() -> None:
    assert _loaded_after("from raybatch.objects import MinioObjectStore")["minio"]


def test_processes_opening_a_database_at_head_leave_out_alembic_and_pyarrow_dataset(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Every writer, the coordinator and the driver open the state store: the migration tool (with
    Mako and Pygments behind it) loads only when the schema must move; writers never read datasets."""
    url = f"sqlite:///{tmp_path}/state.db"
    opened = "import raybatch.settings as s, raybatch.state\n"
    opened += f"raybatch.state.open_state(s.StateSettings(database_url={url!r}))"
    subprocess.run([sys.executable, "-c", opened], check=True)  # made, at head
    code = f"import raybatch.shells.writers, raybatch.shells.runtime\n{opened}"
    assert _loaded_after(code, ("alembic", "mako", "pygments", "pyarrow.dataset")) == {
        "alembic": False,
        "mako": False,
        "pygments": False,
        "pyarrow.dataset": False,
    }


def test_a_writer_builds_and_reads_its_table_file_without_pandas() -> None:
    """pyarrow would import pandas (0.3 s, 40 MB) on a writer's first table: a writer leaves it out."""
    code = (
        "from raybatch.shells.writers import without_pandas\n"
        "without_pandas()\n"
        "import datetime as d\n"
        "from raybatch.models import DocumentRecord, JobRecord, JobStatus, SourceKind\n"
        "from raybatch.steps.table import JobRows, Provenance, documents_table\n"
        "from raybatch.steps.table_files import file_metadata, read_documents_table, written_jobs\n"
        "job = JobRecord(7, '0' * 64, '/in/a.pdf', 'a.pdf', SourceKind.PDF, 10, JobStatus.WRITING)\n"
        "doc = DocumentRecord(job_id=7, index=0, first_page=1, last_page=1, doc_type='invoice')\n"
        "made = Provenance(written_at=d.datetime(2026, 12, 3, tzinfo=d.UTC))\n"
        "rows = [JobRows(job, [doc], made)]\n"
        "table = read_documents_table(documents_table(rows, metadata=file_metadata(written_jobs(rows))))\n"
        "assert table.column('job_id').to_pylist() == [7], table"
    )
    assert _loaded_after(code, ("pandas", "pyarrow")) == {"pandas": False, "pyarrow": True}


def test_a_process_that_imported_pandas_keeps_it() -> None:
    code = "import pandas\nfrom raybatch.shells.writers import without_pandas\n"
    code += "without_pandas()\nimport pandas.api"
    assert _loaded_after(code, ("pandas", "pandas.api")) == {"pandas": True, "pandas.api": True}


def test_a_driver_runs_without_the_claude_sdk() -> None:
    """Only the coordinator calls Claude: a driver (the CLI's run, a notebook's ``run``) reads its
    snapshots without loading the SDK, whose import alone is 0.8 s of CPU before every run."""
    code = (
        "import pickle, raybatch.cli, raybatch.commands, raybatch.pipeline\n"
        "from raybatch.coordinator.snapshot import CoordinatorSnapshot\n"
        "pickle.loads(pickle.dumps(CoordinatorSnapshot(0, 0, 1, 0, False, False, True)))"
    )
    assert _loaded_after(code, ("anthropic", "raybatch.coordinator.coordinator")) == {
        "anthropic": False,
        "raybatch.coordinator.coordinator": False,
    }
