"""Queries whose cost must not grow with the backlog: windows, aggregates, one-statement renewals,
and id lists of any length (PostgreSQL refuses more than 65,535 parameters in one statement)."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa
from clock import START, FakeClock
from state_helpers import register, sha
from statements import statements

from raybatch.models import DocumentRecord, JobStatus, SourceKind
from raybatch.state import SqlStateStore
from raybatch.state.port import NewJob
from raybatch.state.schema import jobs

PENDING, PREPARING, ANSWERED, WRITING = (
    JobStatus.PENDING,
    JobStatus.PREPARING,
    JobStatus.ANSWERED,
    JobStatus.WRITING,
)


def insert_jobs(store: SqlStateStore, count: int, status: JobStatus = PENDING) -> list[int]:
    """``count`` jobs at once (registering them one by one would take minutes)."""
    rows = [
        {
            "sha256": f"{n:064x}",
            "dedupe_key": f"bulk-{n}",
            "source_uri": f"file:///bulk/{n}.pdf",
            "source_name": f"{n}.pdf",
            "kind": "pdf",
            "size_bytes": 1000,
            "mode": "batch",
            "status": status.value,
            "pages": 2,
            "progress": 0.0,
            "attempts": 0,
            "lease_token": 0,
            "created_at": START,
            "updated_at": START,
        }
        for n in range(count)
    ]
    with store._engine.begin() as conn:
        conn.execute(sa.insert(jobs), rows)
        return list(conn.execute(sa.select(jobs.c.id).order_by(jobs.c.id)).scalars())


def test_all_of_a_drivers_leases_are_renewed_in_one_statement(store: SqlStateStore, clock: FakeClock) -> None:
    ids = insert_jobs(store, 1200)
    leases = store.claim_jobs(
        worker_id="d", from_statuses=[PENDING], to_status=PREPARING, lease_seconds=60, limit=1200
    )
    taken = store.claim_jobs(
        worker_id="other", from_statuses=[PENDING], to_status=PREPARING, lease_seconds=60, limit=5
    )
    assert len(leases) == 1200 and taken == []
    store.transition(ids[0], [PREPARING], PENDING)  # ends that lease: it is not renewed
    clock.advance(30)
    with statements(store) as seen:
        renewed = store.renew_leases(leases, 60)
    assert len([s for s in seen if s.lstrip().upper().startswith("UPDATE")]) == 1
    assert sorted(lease.job_id for lease in renewed) == ids[1:]
    assert all(lease.expires_at == START + timedelta(seconds=90) for lease in renewed)
    clock.advance(45)  # past the first expiry, within the renewed one
    others = store.claim_jobs(
        worker_id="other", from_statuses=[PENDING], to_status=PREPARING, lease_seconds=60, limit=5000
    )
    assert [lease.job_id for lease in others] == [ids[0]]


def test_renewing_a_lease_taken_over_leaves_it_out(store: SqlStateStore, clock: FakeClock) -> None:
    job, _ = register(store, 1)
    claim = {"from_statuses": [PENDING], "to_status": PREPARING, "lease_seconds": 10, "limit": 1}
    (mine,) = store.claim_jobs(worker_id="a", **claim)  # type: ignore[arg-type]
    clock.advance(11)
    (theirs,) = store.claim_jobs(worker_id="b", **claim)  # type: ignore[arg-type]
    assert store.renew_leases([mine], 60) == []
    assert [x.job_id for x in store.renew_leases([theirs], 60)] == [job.id]


def test_claims_and_reads_take_70000_ids(store: SqlStateStore) -> None:
    ids = insert_jobs(store, 70_000)
    assert len(store.get_jobs(ids)) == 70_000
    leases = store.claim_jobs(
        worker_id="d",
        from_statuses=[PENDING],
        to_status=PREPARING,
        lease_seconds=60,
        limit=3,
        job_ids=ids[::-1],
    )
    assert [lease.job_id for lease in leases] == ids[:3]
    totals = store.job_totals(ids)
    assert totals.by_status[PENDING] == 69_997 and totals.by_status[PREPARING] == 3
    assert totals.pages == 140_000 and totals.batch_mode == 70_000 and totals.documents == 0
    assert store.count_jobs(ids)[PENDING] == 69_997
    statuses = store.job_statuses([*ids, 10**9])  # an id that does not exist is left out
    assert len(statuses) == 70_000 and statuses[ids[0]] is PREPARING and statuses[ids[-1]] is PENDING


def test_windows_and_aggregates(store: SqlStateStore, clock: FakeClock) -> None:
    ids = insert_jobs(store, 30)
    for job_id in ids[:6]:
        store.transition(job_id, [PENDING], ANSWERED)
    (stale,) = store.claim_jobs(
        worker_id="dead", from_statuses=[ANSWERED], to_status=WRITING, lease_seconds=10, limit=1
    )
    assert [j.id for j in store.claimable_jobs([ANSWERED], WRITING, limit=3)] == ids[1:4]
    clock.advance(11)  # the dead writer's lease ran out: its job is writable again, first in line
    assert [j.id for j in store.claimable_jobs([ANSWERED], WRITING, limit=3)] == [stale.job_id, *ids[1:3]]
    assert [j.id for j in store.list_jobs([PENDING], limit=4, after_id=ids[10])] == ids[11:15]
    store.upsert_documents(ids[0], [DocumentRecord(ids[0], 0, 1, 2, "invoice", pdf_key="k.pdf")])
    totals = store.job_totals()
    assert totals.jobs == 30 and totals.documents == 1 and totals.pages == 60
    assert totals.by_status[ANSWERED] == 5 and totals.by_status[WRITING] == 1


def test_a_claim_of_many_ids_is_one_update_and_returns_the_jobs(store: SqlStateStore) -> None:
    ids = insert_jobs(store, 50)
    store.transition(ids[3], [PENDING], ANSWERED)  # not claimable into preparing: left out
    claim = {"from_statuses": [PENDING], "to_status": PREPARING, "lease_seconds": 60}
    with statements(store) as seen:
        claimed = store.claim_job_records(worker_id="d", limit=50, job_ids=ids, **claim)  # type: ignore[arg-type]
    assert len([s for s in seen if s.lstrip().upper().startswith(("UPDATE", "SELECT"))]) == 1
    assert [job.id for _, job in claimed] == [i for i in ids if i != ids[3]]
    assert all(job.status is PREPARING and job.attempts == 1 for _, job in claimed)
    assert all(lease.token == 1 and lease.attempt == 1 for lease, _ in claimed)
    again = store.claim_jobs(worker_id="e", limit=50, job_ids=ids, **claim)  # type: ignore[arg-type]
    assert again == []


def test_registering_many_files_is_one_transaction(store: SqlStateStore) -> None:
    first, _ = register(store, 1)
    new = [
        NewJob(sha(n), f"file:///in/{n}.pdf", f"{n}.pdf", SourceKind.PDF, 1000 + n, pages=n)
        for n in (1, 2, 3, 2)  # content 1 exists; content 2 comes twice in this call
    ]
    with statements(store) as seen:
        found = store.register_jobs(new)
    assert len([s for s in seen if s.lstrip().upper().startswith("BEGIN")]) <= 1
    assert len([s for s in seen if s.lstrip().upper().startswith("INSERT")]) == 1
    (one, made_one), (two, made_two), (three, made_three), (two_again, made_again) = found
    assert one == first and not made_one
    assert made_two and made_three and not made_again and two_again.id == two.id
    assert (two.pages, three.pages) == (2, 3)
    glances = store.glance_jobs([three.id, one.id, 10**9])
    assert [(g.id, g.status, g.held_until) for g in glances] == [
        (one.id, PENDING, None),
        (three.id, PENDING, None),
    ]


def test_a_sweep_glances_only_at_jobs_changed_or_left_by_a_dead_driver(
    store: SqlStateStore, clock: FakeClock
) -> None:
    ids = insert_jobs(store, 6)
    claim = {"from_statuses": [PENDING], "to_status": PREPARING, "limit": 1}
    store.claim_jobs(worker_id="dead", lease_seconds=5, **claim)  # type: ignore[arg-type]
    store.claim_jobs(worker_id="live", lease_seconds=600, **claim)  # type: ignore[arg-type]
    clock.advance(60)  # the dead driver's lease ran out: its job is glanced at
    store.transition(ids[3], [PENDING], ANSWERED)  # changed since the last look
    glances = store.glance_jobs(ids, changed_within=30)
    assert [(g.id, g.status) for g in glances] == [(ids[0], PREPARING), (ids[3], ANSWERED)]
    assert len(store.glance_jobs(ids)) == 6
