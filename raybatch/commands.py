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
from raybatch.errors import ConfigError, RaybatchError
from raybatch.ids import OutputKeys
from raybatch.models import JobStatus
from raybatch.objects import open_store
from raybatch.pipeline import RunReport, run
from raybatch.report import documents_by_file, evaluate_run, failures, status_summary
from raybatch.settings import ClaudeSettings, Settings, StateSettings, StoreSettings, mask_url, model_prices
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
    every: float = out.PROGRESS_EVERY,
) -> int:
    """Process a source; non-zero exit when any job failed, with the failures listed. Progress is
    drawn as bars in a terminal, and printed as a line every ``every`` seconds elsewhere (a job's logs)."""
    lines = out.ProgressLines(every) if progress and not out.shows_bars() else None
    report = run(
        settings,
        source,
        force=force,
        progress=progress and lines is None,
        on_progress=lines,
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
    out.console.print(f"to look at them and review them in the browser: {console_command(settings)}")
    return 0 if report.ok else 1


def console_command(settings: Settings) -> str:
    """The command that opens the console on these settings' database and store (password masked)."""
    database = mask_url(settings.database_url.get_secret_value())
    return f"raybatch serve --db {database} --store {settings.store}"


def show_status(settings: Settings, *, as_json: bool = False, list_jobs: bool = False) -> int:
    """The state of every job on this database."""
    state = open_state(settings.section(StateSettings), existing=True)
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
    settings: Settings,
    job_ids: Sequence[int],
    *,
    every_live: bool = False,
    source: str | None = None,
    as_json: bool = False,
) -> int:
    """Cancel jobs that have not ended (named, every live one, or those of a source): their
    preparation stops, their batch is canceled at the API once no live job is left in it, their
    writer is fenced, and what they wrote is removed."""
    state = open_state(settings.section(StateSettings), existing=True)
    store = open_store(settings.section(StoreSettings))
    if every_live or source is not None:
        live = state.list_jobs(LIVE_STATUSES)
        chosen = [j.id for j in live] if every_live else live_jobs_of(live, _source_uri(source or ""))
    else:
        chosen = list(job_ids)
        require_known_jobs(state, chosen, settings)
    said = Said(as_json)
    if not chosen:
        said.line("no live jobs to cancel" if every_live or source else "name job ids, --all or --source")
        return said.end(0 if every_live or source else 2, canceled=[], ended=[])
    canceled = cancel_jobs_in(state, store, chosen)
    ended = state.get_jobs(sorted(set(chosen) - set(canceled)))
    for job in ended:
        said.line(f"job {job.id} had already ended ({job.status.value})")
    if canceled:
        said.line(f"{len(canceled)} jobs canceled: {canceled}")
        said.lines.extend(_cancel_batches(settings, state))
    code = 0 if len(canceled) == len(chosen) else 1
    return said.end(code, canceled=canceled, ended={j.id: j.status.value for j in ended})


class Said:
    """What a command that changes jobs says: lines for people, or one JSON object with ``--json``."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.lines: list[str] = []

    def line(self, text: str) -> None:
        self.lines.append(text)

    def end(self, code: int, **data: Any) -> int:
        """Print what was said; the exit code is part of the JSON object too."""
        if self.as_json:
            print(json.dumps({**data, "messages": self.lines, "exit_code": code}, default=str))
        else:
            for text in self.lines:
                print(text)
        return code


def require_known_jobs(state: StateStore, job_ids: Sequence[int], settings: Settings) -> None:
    """One error (exit 2) for job ids this database does not have, the same for every command."""
    unknown = sorted(set(job_ids) - {j.id for j in state.get_jobs(list(job_ids))})
    if unknown:
        raise ConfigError(f"no job {', '.join(map(str, unknown))} in {settings.database_url}")


def _cancel_batches(settings: Settings, state: StateStore) -> list[str]:
    """Cancel at the API now the batches no live job needs, when Claude is configured here; the
    coordinator does it anyway at its next poll. Returns what it did, a line a batch."""
    unneeded = unneeded_batches(state)
    if not unneeded or settings.anthropic_api_key is None:
        return []
    from raybatch.claude.batch_client import AnthropicBatchClient  # the SDK loads when a batch is canceled

    client = AnthropicBatchClient(settings.section(ClaudeSettings))
    lines = []
    for batch_id in unneeded:
        try:
            client.cancel(batch_id)
            lines.append(f"batch {batch_id} canceled at the API")
        except RaybatchError as exc:
            lines.append(
                f"batch {batch_id} not canceled now ({exc}); the coordinator cancels it at its next poll"
            )
    return lines


def _source_uri(source: str) -> str:
    """A source as jobs record it: s3:// and file:// as given, a local path as a file URI."""
    if "://" in source:
        return source
    return Path(source).resolve().as_uri()


def urgent_jobs(
    settings: Settings,
    job_ids: Sequence[int],
    *,
    source: str | None = None,
    pull: bool = False,
    as_json: bool = False,
) -> int:
    """Registered jobs become urgent where that can still change anything; says what each did."""
    from raybatch.priority import jobs_named, make_urgent

    state = open_state(settings.section(StateSettings), existing=True)
    require_known_jobs(state, job_ids, settings)
    chosen = jobs_named(state, job_ids, source)
    said = Said(as_json)
    if not chosen:
        said.line(f"no jobs registered from {source}" if source else "name job ids, or --source URI")
        return said.end(1 if source else 2, jobs={})
    outcomes = make_urgent(state, chosen, pull=pull)
    for outcome in outcomes:
        said.line(f"job {outcome.job_id}: {outcome.message}")
    code = 0 if len(outcomes) == len(set(chosen)) else 1
    return said.end(code, jobs={o.job_id: {"changed": o.changed, "message": o.message} for o in outcomes})


def retry_jobs(
    settings: Settings, job_ids: Sequence[int], *, every_failed: bool = False, as_json: bool = False
) -> int:
    """Failed jobs go back to pending: the next run of their source redoes only what failed."""
    state = open_state(settings.section(StateSettings), existing=True)
    require_known_jobs(state, job_ids, settings)
    chosen = [j.id for j in state.list_jobs([JobStatus.FAILED])] if every_failed else list(job_ids)
    said = Said(as_json)
    if not chosen:
        said.line("no failed jobs to retry" if every_failed else "name job ids, or --failed")
        return said.end(0 if every_failed else 2, reopened=[], not_failed=[])
    reopened = [job_id for job_id in chosen if state.reopen_job(job_id)]
    not_failed = sorted(set(chosen) - set(reopened))
    for job_id in not_failed:
        said.line(f"job {job_id} is not failed; left as it is")
    if reopened:
        said.line(f"{len(reopened)} jobs will be taken up by the next run of their source: {reopened}")
    return said.end(0 if len(reopened) == len(chosen) else 1, reopened=reopened, not_failed=not_failed)


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
        evaluate_run(open_state(settings.section(StateSettings), existing=True), truth),
        out.evaluation_table,
        as_json=as_json,
    )
    return 0
