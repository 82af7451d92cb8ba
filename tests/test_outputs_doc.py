"""docs/outputs.md lists exactly the columns the code writes: the Parquet table's and the SQL tables'."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from raybatch.state.schema import documents, groups
from raybatch.steps.table import SCHEMA

DOC = Path(__file__).resolve().parents[1] / "docs" / "outputs.md"


def listed(heading: str) -> list[str]:
    """The first-column names of the table right under ``heading`` in docs/outputs.md."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    names: list[str] = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("#") and names:
            break
        match = re.match(r"\| `([a-z_0-9]+)` \|", line)
        if match:
            names.append(match.group(1))
        elif names and not line.startswith("|"):
            break
    return names


def test_the_parquet_columns_are_the_schemas() -> None:
    assert listed("## Parquet columns") == SCHEMA.names


@pytest.mark.parametrize("table", [documents, groups], ids=lambda t: t.name)
def test_the_sql_columns_are_the_tables(table) -> None:  # type: ignore[no-untyped-def]
    assert listed(f"### `{table.name}`") == [column.name for column in table.columns]


def test_a_missing_column_would_be_seen() -> None:
    assert "text" in listed("## Parquet columns") and "text_key" in listed("### `documents`")
