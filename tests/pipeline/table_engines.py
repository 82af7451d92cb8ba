"""How many rows each engine reads in a documents table's folder, as it lies in the store.

pandas is not in the lock, so it is not read here; ``pandas.read_parquet(folder)`` reads through
``pyarrow.parquet.read_table(folder)``, which is.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow.dataset as ds
import pyarrow.parquet as pq


def engine_counts(folder: Path) -> dict[str, int]:
    """Rows as pyarrow (a dataset, and ``read_table``) and DuckDB (hive partitioning on) read them."""
    with duckdb.connect() as db:
        sql = f"select count(*) from read_parquet('{folder}/**/*.parquet', hive_partitioning = true)"
        [(in_duckdb,)] = db.execute(sql).fetchall()
    return {
        "pyarrow.dataset": ds.dataset(folder, format="parquet").count_rows(),
        "pyarrow.parquet": pq.read_table(folder).num_rows,
        "duckdb": int(in_duckdb),
    }
