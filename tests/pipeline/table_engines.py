"""How many rows each engine reads in a documents table's folder, as it lies in the store."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas
import pyarrow.dataset as ds
import pyarrow.parquet as pq


def engine_counts(folder: Path) -> dict[str, int]:
    """Rows as pyarrow (a dataset, and ``read_table``), pandas and DuckDB (hive partitioning on)
    read them."""
    with duckdb.connect() as db:
        sql = f"select count(*) from read_parquet('{folder}/**/*.parquet', hive_partitioning = true)"
        [(in_duckdb,)] = db.execute(sql).fetchall()
    return {
        "pyarrow.dataset": ds.dataset(folder, format="parquet").count_rows(),
        "pyarrow.parquet": pq.read_table(folder).num_rows,
        "pandas": len(pandas.read_parquet(folder)),
        "duckdb": int(in_duckdb),
    }
