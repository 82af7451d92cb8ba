"""What the CLI's commands do, given built settings: run, demo, status, cancel, retry, eval."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from raybatch import terminal as out
from raybatch.cancel import LIVE_STATUSES, live_jobs_of, unneeded_batches
from raybatch.cancel import cancel_jobs as cancel_jobs_in
from raybatch.claude.batch_client import AnthropicBatchClient
from raybatch.errors import ConfigError, RaybatchError
from raybatch.ids import OutputKeys
from raybatch.models import JobStatus
from raybatch.objects import open_store
from raybatch.pipeline import RunReport, run
from raybatch.report import documents_by_file, evaluate_run, failures, status_summary
from raybatch.settings import ClaudeSettings, Settings, StateSettings, StoreSettings, model_prices
from raybatch.state import StateStore, open_state


def run_source(
    settings: Settings,
    source: str | Sequence[str],
    *,
    force: bool = False,
    as_json: bool = False,
    progress: bool = True,
    dashboard: bool = True,
    urgent: bool = False,
) -> int:
    """Process a source; non-zero exit when any job failed, with the failures listed."""
    report = run(
        settings,
        source,
        force=force,
        progress=progress,
        notice=out.errors.print,
        dashboard=dashboard,
        urgent=urgent,
    )
    if as_json:
        summary = _summary(settings, report)
        out.print_json({**summary, "failed": failures(report.jobs), "elapsed_s": round(report.elapsed, 2)})
        show_failures(report)
    else:
        show_run(settings, report)
    return 0 if report.ok else 1


def show_run(settings: Settings, report: RunReport) -> None:
    """What ``raybatch run`` ends with (a notebook too): the status of the run's jobs, where the
    outputs are, and the failures with their reasons."""
    out.console.print(out.status_table(_summary(settings, report)))
    root = OutputKeys(open_state(settings.section(StateSettings)).database_id()).root
    out.console.print(f"outputs in {settings.store} under {root}/, state in {settings.database_url}")
    show_failures(report)


def show_failures(report: RunReport) -> None:
    """The run's failed jobs with their reasons, if any."""
    failed = failures(report.jobs)
    if failed:
        out.errors.print(out.failures_table(failed))


def _summary(settings: Settings, report: RunReport) -> dict[str, Any]:
    state = open_state(settings.section(StateSettings))
    return status_summary(state, model_prices(settings), [j.id for j in report.jobs])


def estimate_source(
    settings: Settings,
    source: str | Sequence[str],
    *,
    sample: int | None = None,
    as_json: bool = False,
    dashboard: bool = True,
) -> int:
    """Prepare a source without sending it; print what it will take and cost."""
    from raybatch.estimate import DEFAULT_SAMPLE, estimate

    report = estimate(
        settings, source, sample=sample or DEFAULT_SAMPLE, notice=out.errors.print, dashboard=dashboard
    )
    out.show(report, out.estimate_table, as_json=as_json)
    return 0


def run_demo(
    settings: Settings,
    folder: Path,
    *,
    bundles: int,
    seed: int,
    progress: bool = True,
    dashboard: bool = True,
) -> int:
    """Write the sample corpus, process it, show what was found and how well it was split."""
    from raybatch.samples import write_samples

    samples = folder / "samples"
    truth = write_samples(samples, bundles=bundles, seed=seed)
    out.errors.print(f"sample corpus: {bundles} bundles in {samples}")
    report = run(settings, str(samples), progress=progress, notice=out.errors.print, dashboard=dashboard)
    state = open_state(settings.section(StateSettings))
    out.console.print(out.documents_table(documents_by_file(state, report.jobs)))
    figures = evaluate_run(state, truth)
    out.console.print(out.evaluation_table(figures))
    out.console.print(f"documents, thumbnails and manifests in {settings.store}")
    pending = state.review_totals([j.id for j in report.jobs])["pending"]
    if pending:
        where = f"--db {settings.database_url} --store {settings.store}"
        out.console.print(f"{pending} documents wait for review: raybatch review list {where}")
    show_failures(report)
    return 0 if report.ok else 1


def show_status(settings: Settings, *, as_json: bool = False, list_jobs: bool = False) -> int:
    """The state of every job on this database."""
    state = open_state(settings.section(StateSettings))
    summary = status_summary(state, model_prices(settings))
    if list_jobs:
        summary["job_list"] = [
            {
                "id": j.id,
                "file": j.source_name,
                "status": j.status.value,
                "pages": j.pages,
                "progress": j.progress,
                "error": j.error_message,
            }
            for j in state.list_jobs()
        ]
    out.show(summary, out.status_table, as_json=as_json)
    failed = [] if as_json else failures(state.list_jobs([JobStatus.FAILED]))
    if failed:
        out.console.print(out.failures_table(failed))
    return 0


def cancel_jobs(
    settings: Settings, job_ids: Sequence[int], *, every_live: bool = False, source: str | None = None
) -> int:
    """Cancel jobs that have not ended (named, every live one, or those of a source): their
    preparation stops, their batch is canceled at the API once no live job is left in it, their
    writer is fenced, and what they wrote is removed."""
    state = open_state(settings.section(StateSettings))
    store = open_store(settings.section(StoreSettings))
    if every_live or source is not None:
        live = state.list_jobs(LIVE_STATUSES)
        chosen = [j.id for j in live] if every_live else live_jobs_of(live, _source_uri(source or ""))
    else:
        chosen = list(job_ids)
        unknown = sorted(set(chosen) - {j.id for j in state.get_jobs(chosen)})
        if unknown:
            raise ConfigError(f"no job {', '.join(map(str, unknown))} in {settings.database_url}")
    if not chosen:
        print("no live jobs to cancel" if every_live or source else "name job ids, --all or --source")
        return 0 if every_live or source else 2
    canceled = cancel_jobs_in(state, store, chosen)
    for job in state.get_jobs(sorted(set(chosen) - set(canceled))):
        print(f"job {job.id} had already ended ({job.status.value})")
    if canceled:
        print(f"{len(canceled)} jobs canceled: {canceled}")
        _cancel_batches(settings, state)
    return 0 if len(canceled) == len(chosen) else 1


def _cancel_batches(settings: Settings, state: StateStore) -> None:
    """Cancel at the API now the batches no live job needs, when Claude is configured here; the
    coordinator does it anyway at its next poll."""
    unneeded = unneeded_batches(state)
    if not unneeded or settings.anthropic_api_key is None:
        return
    client = AnthropicBatchClient(settings.section(ClaudeSettings))
    for batch_id in unneeded:
        try:
            client.cancel(batch_id)
            print(f"batch {batch_id} canceled at the API")
        except RaybatchError as exc:
            print(f"batch {batch_id} not canceled now ({exc}); the coordinator cancels it at its next poll")


def _source_uri(source: str) -> str:
    """A source as jobs record it: s3:// and file:// as given, a local path as a file URI."""
    if "://" in source:
        return source
    return Path(source).resolve().as_uri()


def urgent_jobs(
    settings: Settings, job_ids: Sequence[int], *, source: str | None = None, pull: bool = False
) -> int:
    """Registered jobs become urgent where that can still change anything; says what each did."""
    from raybatch.priority import jobs_named, make_urgent

    state = open_state(settings.section(StateSettings))
    chosen = jobs_named(state, job_ids, source)
    if not chosen:
        print(f"no jobs registered from {source}" if source else "name job ids, or --source URI")
        return 1 if source else 2
    outcomes = make_urgent(state, chosen, pull=pull)
    for outcome in outcomes:
        print(f"job {outcome.job_id}: {outcome.message}")
    for job_id in sorted(set(chosen) - {o.job_id for o in outcomes}):
        print(f"job {job_id}: no such job")
    return 0 if len(outcomes) == len(set(chosen)) else 1


def retry_jobs(settings: Settings, job_ids: Sequence[int], *, every_failed: bool = False) -> int:
    """Failed jobs go back to pending: the next run of their source redoes only what failed."""
    state = open_state(settings.section(StateSettings))
    chosen = [j.id for j in state.list_jobs([JobStatus.FAILED])] if every_failed else list(job_ids)
    if not chosen:
        print("no failed jobs to retry" if every_failed else "name job ids, or --failed")
        return 0 if every_failed else 2
    reopened = [job_id for job_id in chosen if state.reopen_job(job_id)]
    for job_id in sorted(set(chosen) - set(reopened)):
        print(f"job {job_id} is not failed; left as it is")
    if reopened:
        print(f"{len(reopened)} jobs will be taken up by the next run of their source: {reopened}")
    return 0 if len(reopened) == len(chosen) else 1


class _TruthDocument(BaseModel):
    first_page: int
    last_page: int
    type: str


class _TruthBundle(BaseModel):
    file: str
    pages: int
    documents: list[_TruthDocument]


class _TruthFile(BaseModel):
    """What ``eval`` reads of a truth.json (the sample corpus writes more)."""

    bundles: list[_TruthBundle]


def read_truth(path: Path) -> dict[str, Any]:
    """A truth.json as ``evaluate`` takes it; a ConfigError saying what is wrong with the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"truth file {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"truth file {path} is not JSON: {exc}") from None
    try:
        _TruthFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the top level"
        raise ConfigError(f"truth file {path} is not a truth.json: {where}: {first['msg']}") from None
    return data


def run_eval(settings: Settings, truth: Mapping[str, Any], *, as_json: bool = False) -> int:
    """Boundary precision/recall/F1, over- and under-splits and type accuracy against ``truth``."""
    out.show(
        evaluate_run(open_state(settings.section(StateSettings)), truth),
        out.evaluation_table,
        as_json=as_json,
    )
    return 0
