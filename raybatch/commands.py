"""What the CLI's commands do, given built settings: run, demo, status, cancel, retry, eval."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from raybatch import console as out
from raybatch.ids import OutputKeys
from raybatch.models import TERMINAL_JOB_STATUSES, JobStatus
from raybatch.pipeline import RunReport, run
from raybatch.report import documents_by_file, evaluate_run, failures, status_summary
from raybatch.settings import Settings, StateSettings, model_prices
from raybatch.state import open_state


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
    report = _run(settings, source, force=force, progress=progress, dashboard=dashboard, urgent=urgent)
    state = open_state(settings.section(StateSettings))
    summary = status_summary(state, model_prices(settings), [j.id for j in report.jobs])
    if as_json:
        out.print_json({**summary, "failed": failures(report.jobs), "elapsed_s": round(report.elapsed, 2)})
    else:
        out.console.print(out.status_table(summary))
        root = OutputKeys(state.database_id()).root
        out.console.print(f"outputs in {settings.store} under {root}/, state in {settings.database_url}")
    return _exit_code(report)


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
    if as_json:
        out.print_json(report)
    else:
        out.console.print(out.estimate_table(report))
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
    report = _run(settings, str(samples), force=False, progress=progress, dashboard=dashboard)
    state = open_state(settings.section(StateSettings))
    out.console.print(out.documents_table(documents_by_file(state, report.jobs)))
    figures = evaluate_run(state, truth)
    out.console.print(out.evaluation_table(figures))
    out.console.print(f"documents, thumbnails and manifests in {settings.store}")
    return _exit_code(report)


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
    if as_json:
        out.print_json(summary)
        return 0
    out.console.print(out.status_table(summary))
    failed = failures(state.list_jobs([JobStatus.FAILED]))
    if failed:
        out.console.print(out.failures_table(failed))
    return 0


def cancel_job(settings: Settings, job_id: int) -> int:
    """Cancel a job that has not ended; its answers still arriving are ignored."""
    state = open_state(settings.section(StateSettings))
    job = state.get_job(job_id)
    live = [s for s in JobStatus if s not in TERMINAL_JOB_STATUSES]
    if state.transition(job_id, live, JobStatus.CANCELED):
        print(f"job {job_id} ({job.source_name}) canceled")
        return 0
    print(f"job {job_id} had already ended ({job.status.value})")
    return 1


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


def run_eval(settings: Settings, truth: Mapping[str, Any], *, as_json: bool = False) -> int:
    """Boundary precision/recall/F1, over- and under-splits and type accuracy against ``truth``."""
    figures = evaluate_run(open_state(settings.section(StateSettings)), truth)
    if as_json:
        out.print_json(figures)
    else:
        out.console.print(out.evaluation_table(figures))
    return 0


def _run(
    settings: Settings,
    source: str | Sequence[str],
    *,
    force: bool,
    progress: bool,
    dashboard: bool,
    urgent: bool = False,
) -> RunReport:
    with out.ProgressBars(enabled=progress) as bars:
        report = run(
            settings,
            source,
            force=force,
            on_progress=bars.update,
            notice=out.errors.print,
            dashboard=dashboard,
            urgent=urgent,
        )
    return report


def _exit_code(report: RunReport) -> int:
    failed = failures(report.jobs)
    if failed:
        out.errors.print(out.failures_table(failed))
        return 1
    return 0
