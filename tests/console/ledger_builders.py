"""A console on the real review ledger: one sample bundle answered from its truth and written by
the real writer (no Ray), every document waiting for review, served with ``connect_review``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from starlette.applications import Starlette
from writing import answered_job, claim_answered

from raybatch.console.app import Console, build_app
from raybatch.console.auth import Logins
from raybatch.console.serve import connect_review
from raybatch.cost import prices_for
from raybatch.models import JobStatus
from raybatch.objects import LocalObjectStore
from raybatch.samples import write_samples
from raybatch.settings import (
    Settings,
    StateSettings,
    StoreSettings,
    load_settings,
)
from raybatch.state import SqlStateStore, open_state
from raybatch.work.writer import ResultWriter


@dataclass
class LedgerData:
    """A database and store with one written job whose documents all wait for review."""

    settings: Settings
    state: SqlStateStore
    store: LocalObjectStore
    job: int

    def app(self) -> Starlette:
        console = Console(
            state=self.state,
            store=self.store,
            store_settings=self.settings.section(StoreSettings),
            prices=prices_for("claude-sonnet-5-5"),
            review=connect_review(self.settings, self.state, self.store),
        )
        return build_app(console, Logins(self.state, None, has_users=False))


def build_ledger_data(folder: Path) -> LedgerData:
    """Write one sample bundle's job under ``folder`` with review_below 1.0 (every document pending)."""
    truth = write_samples(folder / "samples", bundles=1, seed=7)
    settings = load_settings(
        database_url=f"sqlite:///{folder / 'state.db'}", store=str(folder / "store"), review_below=1.0
    )
    state = open_state(settings.section(StateSettings))
    store = LocalObjectStore(folder / "store")
    job = answered_job(state, folder / "samples", truth["bundles"][0])
    _write(settings, state, store, job)
    return LedgerData(settings, state, store, job)


def _write(settings: Settings, state: SqlStateStore, store: LocalObjectStore, job_id: int) -> None:
    """Claim the answered job and write it, as a writer actor would."""
    lease = claim_answered(state, job_id)
    writer = ResultWriter.of_settings(state, store, settings)
    report = writer.write(lease)
    assert lease.job_id == job_id and report.status is JobStatus.COMPLETED, report.error
