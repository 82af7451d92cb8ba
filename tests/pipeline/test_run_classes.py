"""The example taxonomy (logistics) end to end on a local Ray with the emulator: boundaries, classes
and fields exact; the fields come back as typed columns through pyarrow, pandas and DuckDB, after a
run, a rerun and ``--force``, with exact row counts."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pipeline_support import run_settings

from raybatch.ids import OutputKeys
from raybatch.pipeline import run
from raybatch.report import evaluate_run
from raybatch.samples.logistics import write_logistics
from raybatch.settings import StateSettings
from raybatch.state import open_state

pytestmark = pytest.mark.timeout(600)


def _table_dir(settings, state) -> Path:  # type: ignore[no-untyped-def]
    return Path(settings.store) / OutputKeys(state.database_id()).documents_table


def test_the_logistics_taxonomy_runs_exact_and_its_columns_are_typed(
    ray_session: None, tmp_path: Path
) -> None:
    import duckdb

    pd = pytest.importorskip("pandas")  # not a declared dependency yet: read when installed

    truth = write_logistics(tmp_path / "samples")
    settings = run_settings(tmp_path, raybatch_emulator=True, classes_file="logistics")
    run(settings, str(tmp_path / "samples"))
    state = open_state(settings.section(StateSettings))
    scores = evaluate_run(state, truth)
    assert (scores["boundary_f1"], scores["type_accuracy"], scores["field_accuracy"]) == (1.0, 1.0, 1.0)
    assert scores["documents_found"] == scores["documents_expected"] == 11
    assert set(scores["by_class"]) == {
        "bill_of_lading",
        "packing_list",
        "commercial_invoice",
        "customs_declaration",
        "other",
    }
    assert all(job.classes_sha for job in state.list_jobs())
    [(name, _, canonical)] = {state.get_classes_file(job.classes_sha or "") for job in state.list_jobs()}
    assert name == "logistics" and "bill_of_lading" in canonical

    folder = _table_dir(settings, state)
    frame = pd.read_parquet(folder)
    assert len(frame) == 11 and len(pq.read_table(folder)) == 11
    assert (
        str(frame["bill_of_lading_containers"].dtype) == "Int64"
        or frame["bill_of_lading_containers"].dtype.kind in "if"
    )
    assert frame["packing_list_hazardous"].dropna().map(type).eq(bool).all()
    assert frame["commercial_invoice_total"].dtype.kind == "f"
    lists = frame["bill_of_lading_container_numbers"].dropna()
    assert len(lists) == 3 and all(len(items) == 2 for items in lists)
    duck = duckdb.sql(f"SELECT * FROM read_parquet('{folder}/*.parquet', hive_partitioning = true)")
    types = dict(zip(duck.columns, (str(t) for t in duck.types), strict=True))
    assert (
        types["bill_of_lading_containers"] == "BIGINT" and types["packing_list_gross_weight_kg"] == "DOUBLE"
    )
    assert types["date_value"] == "DATE" and types["bill_of_lading_container_numbers"] == "VARCHAR[]"
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{folder}/*.parquet')").fetchall() == [(11,)]

    run(settings, str(tmp_path / "samples"))  # a rerun: the same rows
    assert len(pd.read_parquet(folder)) == 11
    run(settings, str(tmp_path / "samples"), force=True)  # new jobs for the same files: twice the rows
    assert len(pd.read_parquet(folder)) == 22 and len(pq.read_table(folder)) == 22
    assert duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{folder}/*.parquet', hive_partitioning = true)"
    ).fetchall() == [(22,)]
