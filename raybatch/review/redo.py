"""``raybatch redo JOB[:INDEX] [--fresh]``: ask Claude again for the chunks behind a job or one of
its documents, and keep the new answer as new versions of the job's documents.

The job goes back to pending with those chunks' answers cleared (``StateStore.redo_job``), then its
source is run: preparation sends the cleared chunks again (an answer another job holds under the
same processing key is taken instead, unless ``--fresh``), their cost is counted as any request's,
and the writer records the new answer in the ledger as a ``redo`` (the previous versions kept).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

from raybatch.errors import ConfigError
from raybatch.pipeline import RunReport, run
from raybatch.report import status_summary
from raybatch.settings import Settings, StateSettings, model_prices
from raybatch.state import open_state

_TARGET = re.compile(r"^\s*(\d+)\s*(?::\s*(\d+)\s*)?$")


def redo(
    settings: Settings, target: str, *, fresh: bool = False, progress: bool = False
) -> tuple[RunReport, float]:
    """Redo ``JOB`` or ``JOB:INDEX``; the run's report and what the job's requests cost so far."""
    match = _TARGET.match(target)
    if match is None:
        raise ConfigError(f"{target!r}: write JOB or JOB:INDEX, e.g. 12 or 12:3")
    job_id, index = int(match.group(1)), match.group(2)
    state = open_state(settings.section(StateSettings))
    job = state.get_job(job_id)
    chunks = state.get_chunks(job_id)
    if index is not None:
        doc = next((d for d in state.list_documents(job_id) if d.index == int(index)), None)
        if doc is None:
            raise ConfigError(f"no document {target}")
        chunks = [c for c in chunks if c.first_page <= doc.last_page and doc.first_page <= c.last_page]
    pages = (
        (min(c.first_page for c in chunks), max(c.last_page for c in chunks)) if index is not None else None
    )
    if not state.redo_job(job_id, [c.n for c in chunks], fresh=fresh, pages=pages):
        raise ConfigError(f"job {job_id} is {job.status.value}: only a completed job is redone")
    report = run(settings, _source_path(job.source_uri), progress=progress)
    cost = status_summary(state, model_prices(settings), [job_id])["estimated_cost_usd"]
    return report, float(cost)


def _source_path(uri: str) -> str:
    """A job's source as ``run`` takes it: s3:// as it is, a file URI as its path."""
    if uri.startswith("file://"):
        return str(Path(unquote(urlparse(uri).path)))
    return uri
