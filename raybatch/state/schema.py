"""The state tables. Alembic migrations in ``migrations/versions`` create exactly these.

Times are stored in UTC (``UtcDateTime``) so comparisons in SQL agree on SQLite and PostgreSQL.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


class UtcDateTime(sa.TypeDecorator[datetime]):
    """An aware UTC datetime on the way in and out, whatever the backend keeps."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the state store; use an aware UTC time")
        value = value.astimezone(UTC)
        # SQLite keeps text: a fixed-width UTC string sorts in time order.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _created() -> list[sa.Column[Any]]:
    return [
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
    ]


JSON_DOCUMENT = sa.JSON().with_variant(JSONB(), "postgresql")  # JSONB where it exists: queryable


jobs = sa.Table(
    "jobs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("sha256", sa.String(64), nullable=False, index=True),
    # sha256 for a normal registration, sha256 + a random suffix for a forced one: the unique
    # constraint is what keeps concurrent registrations of one file to one job.
    sa.Column("dedupe_key", sa.String(100), nullable=False, unique=True),
    sa.Column("source_uri", sa.Text, nullable=False),
    sa.Column("source_name", sa.Text, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("mode", sa.String(16), nullable=False),
    # urgent or normal: urgent jobs are claimed, sent (synchronously) and written first
    sa.Column("priority", sa.String(8), nullable=False, server_default="normal"),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("pages", sa.Integer),
    sa.Column("progress", sa.Float, nullable=False, default=0.0),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("lease_owner", sa.String(200)),
    sa.Column("lease_token", sa.BigInteger, nullable=False, default=0),
    sa.Column("lease_expires_at", UtcDateTime()),
    sa.Column("error_class", sa.String(100)),
    sa.Column("error_message", sa.Text),
    sa.Column("classes_sha", sa.String(64)),  # the classes file its documents were written under
    *_created(),
    sa.Index("ix_jobs_status_lease", "status", "lease_expires_at"),
    # the run whose spend cap (MAX_COST_USD) governs the job: the last capped run that registered it
    sa.Column("spend_run", sa.String(64), index=True),
)

chunks = sa.Table(
    "chunks",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("first_page", sa.Integer, nullable=False),
    sa.Column("last_page", sa.Integer, nullable=False),
    sa.Column("custom_id", sa.String(64), nullable=False, unique=True),
    sa.Column("processing_key", sa.String(64), nullable=False, index=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("request_bytes", sa.BigInteger, nullable=False, default=0),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("batch_id", sa.String(100), index=True),  # Anthropic's id of the batch holding it
    sa.Column("answer", sa.Text),
    sa.Column("input_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("output_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("cache_read_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("cache_creation_tokens", sa.BigInteger, nullable=False, default=0),
    sa.Column("error_class", sa.String(100)),
    sa.Column("error_message", sa.Text),
    sa.Column("rotations", sa.JSON),  # page → clockwise degrees found when the chunk was prepared
    # answered by the built-in emulator (prepared under it)
    sa.Column("emulated", sa.Boolean, nullable=False, default=False, server_default=sa.false()),
    sa.Column("sent_mode", sa.String(8)),  # batch or sync: what the request was last sent as
    sa.Column("sent_at", UtcDateTime()),  # when the spend gate let it go
    sa.Column("estimated_cost_usd", sa.Float),  # what it was expected to cost when sent
    sa.Column("reused_from", sa.String(64)),  # custom_id whose answer it took, not sent itself
    *_created(),
    sa.UniqueConstraint("job_id", "n"),
    sa.Index("ix_chunks_status", "status"),
)

# Answers paid for that no longer stand: those a redo cleared (``raybatch redo``), those a chunk
# prepared under a new processing key replaced, those cut at max_tokens or unparseable and asked
# again. Each one's tokens, mode and time, still counted in every total and spend cap beside the
# chunks' own (0600_replaced_answers).
replaced_answers = sa.Table(
    "replaced_answers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("custom_id", sa.String(64), nullable=False),
    sa.Column("sent_mode", sa.String(8)),
    sa.Column("sent_at", UtcDateTime()),
    sa.Column("input_tokens", sa.BigInteger, nullable=False),
    sa.Column("output_tokens", sa.BigInteger, nullable=False),
    sa.Column("cache_read_tokens", sa.BigInteger, nullable=False),
    sa.Column("cache_creation_tokens", sa.BigInteger, nullable=False),
    sa.Column("emulated", sa.Boolean, nullable=False),
    sa.Column("created_at", UtcDateTime(), nullable=False),  # when the redo replaced it
)

batches = sa.Table(
    "batches",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("anthropic_id", sa.String(100), unique=True),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("request_count", sa.Integer, nullable=False),
    sa.Column("request_bytes", sa.BigInteger, nullable=False),
    sa.Column("counts", sa.JSON),
    sa.Column("raw", sa.Text),
    sa.Column("ended_at", UtcDateTime()),
    # found by listing after a create that failed, not returned by our own create: yields to it
    sa.Column("adopted", sa.Boolean, nullable=False, server_default=sa.false()),
    # the coordinator that recorded the intent: it polls the batch while it beats, the lead after
    sa.Column("created_by", sa.String(64)),
    *_created(),
)

# Which requests an intent (and so the batch created from it) carries; kept after the batch ends.
batch_requests = sa.Table(
    "batch_requests",
    metadata,
    sa.Column("batch_id", sa.Integer, sa.ForeignKey("batches.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("custom_id", sa.String(64), primary_key=True, index=True),
    # the custom_id again while the intent is CREATING, NULL after: two intents cannot hold one request
    sa.Column("creating", sa.String(64)),
    sa.Index("uq_batch_requests_creating", "creating", unique=True),
)

documents = sa.Table(
    "documents",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    sa.Column("doc_index", sa.Integer, nullable=False),
    sa.Column("first_page", sa.Integer, nullable=False),
    sa.Column("last_page", sa.Integer, nullable=False),
    sa.Column("doc_type", sa.String(64), nullable=False),
    # the classes file's fields, by name, as checked (``raybatch.classes.values``)
    sa.Column("field_values", JSON_DOCUMENT, nullable=False),
    sa.Column("problems", sa.JSON, nullable=False),  # [[field, reason], ...]: values that did not fit
    sa.Column("repaired", sa.Boolean, nullable=False, default=False, server_default=sa.false()),
    sa.Column("fields", sa.JSON, nullable=False),
    sa.Column("group_key", sa.String(500), index=True),
    sa.Column("pdf_key", sa.Text),
    sa.Column("thumb_key", sa.Text),
    sa.Column("extra", sa.JSON, nullable=False),
    # raybatch.review: the current version, its score, reasons and review state (0500_review)
    sa.Column("version", sa.Integer, nullable=False, server_default="1"),
    sa.Column("confidence", sa.Float),
    sa.Column("review", sa.String(16), nullable=False, server_default="none", index=True),
    sa.Column("review_reasons", sa.JSON),
    sa.Column("field_confidence", sa.JSON),
    sa.Column("text_key", sa.Text),
    *_created(),
    sa.UniqueConstraint("job_id", "doc_index"),
)

# Corrections: one row each, the ledger of what people changed (raybatch.review).
corrections = sa.Table(
    "corrections",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("idempotency_key", sa.String(64), nullable=False, unique=True),
    sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("doc_index", sa.Integer, nullable=False),
    sa.Column("base_version", sa.Integer, nullable=False),  # the version of the document it applied to
    sa.Column("kind", sa.String(16), nullable=False),  # accept, set, split, merge, move, redo
    sa.Column("reviewer", sa.String(200), nullable=False),
    sa.Column("change", sa.JSON, nullable=False),  # what changed, as the correction said it
    sa.Column("result", sa.JSON, nullable=False),  # the (index, version) pairs it wrote, and removed
    sa.Column("created_at", UtcDateTime(), nullable=False),
)

# The versions a correction replaced: each previous row as it was, with its objects' keys.
document_versions = sa.Table(
    "document_versions",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    sa.Column("doc_index", sa.Integer, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("record", sa.JSON, nullable=False),  # the documents row's values
    sa.Column("pdf_key", sa.Text),
    sa.Column("thumb_key", sa.Text),
    sa.Column("replaced_by", sa.Integer, sa.ForeignKey("corrections.id", ondelete="SET NULL")),
    sa.Column("created_at", UtcDateTime(), nullable=False),
    sa.UniqueConstraint("job_id", "doc_index", "version"),
)

# Each classes file jobs were written under, by the sha256 of its canonical form: enough to load it again.
classes_files = sa.Table(
    "classes_files",
    metadata,
    sa.Column("sha256", sa.String(64), primary_key=True),
    sa.Column("name", sa.Text, nullable=False),  # where it came from (a file name), as metadata only
    sa.Column("text", sa.Text, nullable=False),  # the file as written (YAML)
    sa.Column("canonical", sa.Text, nullable=False),  # what was used: the file, SPLIT_MODE applied
    sa.Column("created_at", UtcDateTime(), nullable=False),
)

groups = sa.Table(
    "groups",
    metadata,
    sa.Column("key", sa.String(500), primary_key=True),
    sa.Column("label", sa.Text, nullable=False),
    *_created(),
)

page_ocr = sa.Table(
    "page_ocr",
    metadata,
    sa.Column("sha256", sa.String(64), primary_key=True),
    sa.Column("page", sa.Integer, primary_key=True),
    sa.Column("engine", sa.String(100), primary_key=True),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("origin", sa.String(100), nullable=False),
    sa.Column("confidence", sa.Float, nullable=False),
    sa.Column("rotation", sa.Integer, nullable=False),
    sa.Column("created_at", UtcDateTime(), nullable=False),
)

errors = sa.Table(
    "errors",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id", ondelete="CASCADE"), index=True),
    sa.Column("phase", sa.String(32), nullable=False),
    sa.Column("error_class", sa.String(100), nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("created_at", UtcDateTime(), nullable=False),
)

settings = sa.Table(
    "settings",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
    sa.Column("updated_at", UtcDateTime(), nullable=False),
)

# The workload budget: one row per lease on cost units; a lease past ``expires_at`` counts for nothing.
workload = sa.Table(
    "workload",
    metadata,
    sa.Column("lease_id", sa.String(64), primary_key=True),
    sa.Column("holder", sa.String(200), nullable=False),
    sa.Column("units", sa.Integer, nullable=False),
    # An elastic holder (a run) sizes itself from what is free; a fixed one uses exactly its units.
    sa.Column("elastic", sa.Boolean, nullable=False),
    sa.Column("taken_at", UtcDateTime(), nullable=False),
    sa.Column("expires_at", UtcDateTime(), nullable=False, index=True),
)

# Coordinators on this database: each one's heartbeat (its sync calls are live while it beats).
coordinators = sa.Table(
    "coordinators",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("started_at", UtcDateTime(), nullable=False),
    sa.Column("expires_at", UtcDateTime(), nullable=False, index=True),
)

# The lead among them: only its holder sweeps (recovery) and polls batches.
coordinator_lead = sa.Table(
    "coordinator_lead",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("holder", sa.String(64), nullable=False),
    sa.Column("expires_at", UtcDateTime(), nullable=False),
)

# The console's users (``raybatch users add``): a name, a role and an argon2 hash of the password.
console_users = sa.Table(
    "console_users",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("password_hash", sa.Text, nullable=False),
    *_created(),
)
