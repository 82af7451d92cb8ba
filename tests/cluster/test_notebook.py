"""notebooks/quickstart.ipynb: committed with the outputs of a run (it renders where it is read), and it
runs from top to bottom (nbclient)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from cluster_support import JOB_ENV
from headnode import RAY_ENV, REPO

NOTEBOOK = REPO / "notebooks" / "quickstart.ipynb"


def _cells(nb: Any) -> dict[str, Any]:
    return {cell.id: cell for cell in nb.cells}


def _shown(cell: Any) -> list[str]:
    """The text of each table or bar a cell displayed (rich shows them as HTML with a plain twin)."""
    shown = [o["data"]["text/plain"] for o in cell.outputs if "text/html" in o.get("data", {})]
    return [re.sub(r"\x1b\[[0-9;]*m", "", text) for text in shown]  # without the colours


def test_committed_notebook_shows_a_runs_outputs_and_no_error() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    cells = _cells(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count is not None for c in code)
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    assert "<table" in "".join(o.get("data", {}).get("text/html", "") for o in cells["parquet"].outputs)
    assert "<figcaption" in "".join(
        o.get("data", {}).get("text/html", "") for o in cells["thumbnails"].outputs
    )


@pytest.mark.ray
@pytest.mark.slow
def test_notebook_runs_the_sample_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    cells = _cells(nb)
    assert "parameters" in cells["parameters"].metadata["tags"]
    out = tmp_path / "out"
    params = {
        "OUT": f"Path({str(out)!r})",
        "BUNDLES": "1",
        "SEED": "7",
        "DASHBOARD": "False",
        "CLUSTER": "False",
    }
    params["EMULATOR"] = "True"
    assignments = "".join(f"{name} = {value}\n" for name, value in params.items())
    cells["parameters"].source = "from pathlib import Path\n" + assignments
    for name, value in {**RAY_ENV, **JOB_ENV}.items():  # the kernel inherits these
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)

    where = {"metadata": {"path": str(tmp_path)}}
    NotebookClient(nb, timeout=240, kernel_name="python3", resources=where).execute()

    text = "".join(o.get("text", "") for o in cells["run"].outputs)
    assert "using the built-in Claude emulator" in text and "1 jobs, 0 failed" in text
    bars, status = _shown(cells["run"])[0], "".join(_shown(cells["run"])[1:])
    assert re.search(r"jobs\s+\S*\s+1/1", bars)  # the progress bars' last state
    assert "raybatch status" in status and re.search(r"completed\s*│\s*1\s", status)
    counted, listed = _shown(cells["table"])
    documents = sum("bundle_000.pdf" in line for line in listed.splitlines())
    [row] = [line for line in counted.splitlines() if "bundle_000.pdf" in line]
    assert documents > 1 and row.split()[-2] == str(documents)  # the total column
    gallery = "".join(o.get("data", {}).get("text/html", "") for o in cells["thumbnails"].outputs)
    assert gallery.count("<figcaption") == gallery.count("data:image/webp;base64,") == min(6, documents)
    assert gallery.count('<a href="file://') == min(6, documents)  # each links its PDF
    frame = "".join(o.get("data", {}).get("text/html", "") for o in cells["parquet"].outputs)
    assert "<table" in frame and "doc_type" in frame  # a pandas DataFrame of the documents
    evaluation = "".join(_shown(cells["evaluation"]))
    assert "boundary f1" in evaluation and "documents found" in evaluation
    assert any((out / "store").glob("db-*/jobs/*/documents/*.pdf"))
