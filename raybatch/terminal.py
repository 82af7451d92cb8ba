"""What raybatch shows, in a terminal and in a Jupyter notebook alike: progress bars while a run
works, tables and figures when it ends."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from rich.console import Console, ConsoleRenderable, RenderHook
from rich.logging import RichHandler
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from raybatch.models import DocumentRecord, Priority
from raybatch.report import EVAL_KEYS

if TYPE_CHECKING:
    from raybatch.loops.driver import Progress as RunProgress


class _PlainWhenPiped(RenderHook):
    """Tables drawn without box lines when the output is neither a terminal nor a notebook (a file, a
    pipe, a script)."""

    def __init__(self, target: Console) -> None:
        self.target = target

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        if not (self.target.is_terminal or self.target.is_jupyter):
            for renderable in renderables:
                if isinstance(renderable, Table):
                    renderable.box = None
        return renderables


console = Console(stderr=False)
errors = Console(stderr=True)  # the progress bars, notices and log records: records print above the bars
for _target in (console, errors):
    _target.push_render_hook(_PlainWhenPiped(_target))


def log_through_rich(level: int) -> None:
    """Log records through the progress bars' console, so a warning prints above them, never across."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, RichHandler)]:
        root.removeHandler(old)
    root.addHandler(RichHandler(console=errors, show_path=False, markup=False, rich_tracebacks=False))
    root.setLevel(level)


class ProgressBars:
    """Bars (jobs ended, pages prepared) and a status line, redrawn on every tick; once a run has
    urgent jobs, they get a bar of their own and the jobs bar counts the normal ones. In a notebook
    the bars are one output redrawn in place (rich's live display there needs ipywidgets)."""

    def __init__(self, enabled: bool = True, shown_on: Console | None = None) -> None:
        shown_on = shown_on or errors
        self._in_notebook = enabled and shown_on.is_jupyter
        self._output: Any = None  # the notebook's output the bars are redrawn in
        self._bars = Progress(
            TextColumn("{task.description:<8}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=shown_on,
            disable=not enabled or self._in_notebook,
            transient=False,
        )
        self._jobs = self._bars.add_task("jobs", total=None, detail="")
        self._pages = self._bars.add_task("pages", total=None, detail="")
        self._urgent = self._bars.add_task("urgent", total=None, detail="", visible=False)

    def __enter__(self) -> ProgressBars:
        if self._in_notebook:
            from IPython.display import display

            self._output = display(self._table(), display_id=True)
        else:
            self._bars.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._bars.stop()

    def update(self, progress: RunProgress) -> None:
        """Take one progress snapshot from the driver."""
        stages = ", ".join(f"{name} {count}" for name, count in sorted(progress.by_status.items()))
        paused = " [paused]" if progress.paused else ""
        paused += f" [parked: {progress.parked}]" if progress.parked else ""
        normal_total = progress.total - progress.urgent_total
        normal_done = progress.done - progress.urgent_done
        if progress.urgent_total:
            self._bars.update(
                self._urgent, total=progress.urgent_total, completed=progress.urgent_done, visible=True
            )
            self._bars.update(self._jobs, description="normal")
        self._bars.update(self._jobs, total=normal_total, completed=normal_done, detail=stages + paused)
        detail = (
            f"batches {progress.active_batches}, writers {progress.writer_mb:.0f} MB, "
            f"docs {progress.documents}"
        )
        detail += f", review {progress.review_pending}" if progress.review_pending else ""
        self._bars.update(
            self._pages, total=progress.pages_total or None, completed=progress.pages_prepared, detail=detail
        )
        if self._output is not None:
            self._output.update(self._table())

    def _table(self) -> Table:
        return self._bars.make_tasks_table(self._bars.tasks)


PROGRESS_EVERY = 5.0  # seconds between progress lines


def shows_bars() -> bool:
    """True when progress can be drawn in place (a terminal, a notebook); else it is printed as lines."""
    return errors.is_terminal or errors.is_jupyter


class ProgressLines:
    """Progress where nothing is redrawn (``ray job logs``, a file): one line every ``every``
    seconds, and the last one whatever the time."""

    def __init__(
        self,
        every: float = PROGRESS_EVERY,
        write: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._every, self._write, self._monotonic = every, write, monotonic
        self._last: float | None = None

    def __call__(self, progress: RunProgress) -> None:
        now = self._monotonic()
        finished = progress.total > 0 and progress.done == progress.total
        if finished or self._last is None or now - self._last >= self._every:
            self._last = now
            self._write(progress_line(progress))


def progress_line(progress: RunProgress) -> str:
    """``progress: jobs 3/6 done (completed 3, writing 1, ...), pages 120/172, batches 1, ...``."""
    stages = ", ".join(f"{status} {n}" for status, n in sorted(progress.by_status.items()))
    return (
        f"progress: jobs {progress.done}/{progress.total} done ({stages}), "
        f"pages {progress.pages_prepared}/{progress.pages_total}, batches {progress.active_batches}, "
        f"writers {progress.writer_mb:.0f} MB, documents {progress.documents}, "
        f"{progress.elapsed:.0f} s{' [paused]' if progress.paused else ''}"
        f"{f' [parked: {progress.parked}]' if progress.parked else ''}"
    )


def status_table(summary: Mapping[str, Any]) -> Table:
    """``raybatch status`` as a table."""
    table = Table(title="raybatch status", show_header=True)
    table.add_column("status")
    table.add_column("jobs", justify="right")
    table.add_column("urgent", justify="right")
    table.add_column("normal", justify="right")
    by_priority = summary.get("by_priority", {})
    for status, count in summary["by_status"].items():
        split = [str(by_priority.get(p, {}).get(status, 0)) for p in (Priority.URGENT, Priority.NORMAL)]
        table.add_row(status, str(count), *split)
    table.add_section()
    for name in ("jobs", "pages", "documents", "active_batches", "input_tokens", "output_tokens"):
        table.add_row(name.replace("_", " "), f"{summary[name]:,}")
    table.add_row("requests (reused, emulated)", _requests(summary))
    if summary.get("review"):
        table.add_row("review (pending, accepted, corrected)", _review(summary["review"]))
    table.add_row("estimated cost", f"${summary['estimated_cost_usd']:.4f}")
    table.add_row("paused", "yes" if summary["paused"] else "no")
    if summary.get("canceled", {}).get("jobs"):
        canceled = summary["canceled"]
        spent = f"{canceled['jobs']:,} (${canceled['estimated_cost_usd']:.4f})"
        table.add_row("canceled (spent before)", spent)
    if summary.get("spend"):
        table.add_row("spend cap", spend_line(summary["spend"]))
    return table


def _review(review: Mapping[str, int]) -> str:
    return f"{review.get('pending', 0):,} ({review.get('accepted', 0):,}, {review.get('corrected', 0):,})"


def _requests(summary: Mapping[str, Any]) -> str:
    return f"{summary['requests']:,} ({summary['requests_reused']:,}, {summary['requests_emulated']:,})"


def spend_line(spend: Mapping[str, Any]) -> str:
    """The spend cap's state in a few words."""
    names = {"max_run_usd": "a run", "max_day_usd": "a day"}
    caps = [f"${spend[key]:.4f} {name}" for key, name in names.items() if spend.get(key)]
    text = f"committed ${spend['committed_run_usd']:.4f} this run of {', '.join(caps) or 'no cap'}"
    return text + (f"; PARKED: {spend['parked']}" if spend.get("parked") else "")


def document_list_table(by_file: Mapping[str, Sequence[DocumentRecord]]) -> Table:
    """Every document found: where it lies in its file and what it is."""
    table = Table(title="documents", show_header=True)
    table.add_column("file", no_wrap=True)
    for name in ("#", "pages"):
        table.add_column(name, justify="right", no_wrap=True)
    for name in ("type", "fields", "problems", "group"):
        table.add_column(name)
    for file, docs in by_file.items():
        for d in docs:
            details = (d.doc_type, _shown_values(d.values), len(d.problems) or None, d.group_key)
            pages = f"{d.first_page}-{d.last_page}"
            texts = (Text("" if v is None else str(v)) for v in (file, d.index, pages, *details))
            table.add_row(*texts)  # as Text: a title's [brackets] are not markup
    return table


def _shown_values(values: Mapping[str, Any], most: int = 3) -> str:
    """The first few fields a document has a value for, as ``name: value``."""
    found = [f"{name}: {value}" for name, value in values.items() if value not in (None, "", [])]
    return "; ".join(found[:most]) + ("; …" if len(found) > most else "")


def documents_table(by_file: Mapping[str, Sequence[DocumentRecord]]) -> Table:
    """Documents found, counted by source file and type."""
    types = sorted({d.doc_type for docs in by_file.values() for d in docs})
    table = Table(title="documents found", show_header=True)
    table.add_column("file")
    for name in types:
        table.add_column(name, justify="right")
    table.add_column("total", justify="right")
    for file, docs in by_file.items():
        counts = Counter(d.doc_type for d in docs)
        table.add_row(file, *(str(counts.get(t, 0)) for t in types), str(len(docs)))
    return table


def evaluation_table(figures: Mapping[str, Any]) -> Table:
    """The split-accuracy figures of ``raybatch eval``."""
    table = Table(title="split accuracy against the truth", show_header=True)
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key in EVAL_KEYS:
        value = figures.get(key)
        table.add_row(key.replace("_", " "), f"{value:.3f}" if isinstance(value, float) else str(value))
    for kind, scores in (figures.get("by_class") or {}).items():
        table.add_row(
            f"{kind}: boundary f1 · type accuracy",
            f"{scores['boundary_f1']:.3f} · {scores['type_accuracy']:.3f}",
        )
    if figures.get("field_accuracy") is not None:
        table.add_row("field accuracy", f"{figures['field_accuracy']:.3f}")
    for name, scores in (figures.get("by_field") or {}).items():
        table.add_row(f"field {name} ({scores['checked']})", f"{scores['accuracy']:.3f}")
    return table


def failures_table(failed: Iterable[tuple[int, str, str]]) -> Table:
    """Failed jobs with their reasons."""
    table = Table(title="failed jobs", show_header=True)
    table.add_column("job", justify="right")
    table.add_column("file")
    table.add_column("reason")
    for job_id, name, reason in failed:
        table.add_row(str(job_id), name, reason)
    return table


def workload_table(budget: Mapping[str, Any]) -> Table:
    """``raybatch workload``: who holds how many units of the budget, until when."""
    title = f"workload: {budget['in_use']} of {budget['capacity']} units in use, {budget['free']} free"
    table = Table(title=title, show_header=True)
    table.add_column("holder")
    table.add_column("units", justify="right")
    table.add_column("kind")
    table.add_column("expires")
    for lease in budget["holders"]:
        kind = "run (elastic)" if lease["elastic"] else "fixed"
        table.add_row(lease["holder"], str(lease["units"]), kind, lease["expires_at"])
    return table


def show(value: Any, table: Callable[[Any], Table], *, as_json: bool = False) -> None:
    """``value`` as one JSON object (for scripts), or as its table."""
    if as_json:
        print_json(value)
    else:
        console.print(table(value))


def print_json(value: Any) -> None:
    """One JSON object on one line (for scripts)."""
    console.print_json(json.dumps(value, default=str)) if console.is_terminal else print(
        json.dumps(value, default=str)
    )


def estimate_table(report: Mapping[str, Any]) -> Table:
    """``raybatch estimate`` as a table."""
    table = Table(title=f"estimate: {report['model']}, {report['modality']}, {report['mode']}")
    table.add_column("what")
    table.add_column("", justify="right")
    for name in ("files", "jobs_to_send", "pages", "requests", "requests_reused", "batches"):
        table.add_row(name.replace("_", " "), f"{report[name]:,}")
    counted = f"{report['requests_counted']:,} counted, extrapolated" if report["extrapolated"] else "counted"
    table.add_row(f"input tokens ({counted})", f"{report['input_tokens']:,}")
    table.add_row("expected output tokens", f"{report['expected_output_tokens']:,}")
    table.add_section()
    table.add_row("cost at batch prices", f"${report['cost_batch_usd']:.4f}")
    table.add_row("cost at sync prices", f"${report['cost_sync_usd']:.4f}")
    table.add_row("saved by batching", f"${report['saving_batching_usd']:.4f}")
    as_text = f"saved by PAGE_MODALITY ({report['pages_as_text']:,} pages as text)"
    table.add_row(as_text, f"${report['saving_modality_usd']:.4f}")
    prices = report["prices"]
    per_million = f"${prices['input']} / ${prices['output']} (taken {prices['taken']})"
    table.add_row("prices per million tokens, in / out", per_million)
    return table
