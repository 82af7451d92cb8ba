"""Documents and groups, the per-page OCR cache, the errors log, the pause flag and other flags."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence

import sqlalchemy as sa

from raybatch.errors import LeaseLost
from raybatch.models import CachedPage, DocumentRecord, JobStatus, PageText
from raybatch.state.base import SqlBase, clip, in_groups
from raybatch.state.port import ErrorRecord
from raybatch.state.rows import DOCUMENT_COLUMNS, document_record, document_values, error_record, page_text
from raybatch.state.schema import classes_files, errors, groups, page_ocr, settings
from raybatch.state.schema import documents as document_rows
from raybatch.state.schema import jobs as job_rows

PAUSED_KEY = "paused"
DATABASE_ID_KEY = "database_id"


class CatalogQueries(SqlBase):
    """The documents, groups, OCR cache, errors and settings part of ``SqlStateStore``."""

    def upsert_documents(self, job_id: int, documents: Sequence[DocumentRecord]) -> None:
        """Make the job's documents exactly these (by index): reruns never duplicate, and indexes
        not in ``documents`` are removed."""
        if self.upsert_documents_of({job_id: documents}):
            raise LeaseLost(f"job {job_id} was canceled: its documents are not written")

    def upsert_documents_of(self, documents: Mapping[int, Sequence[DocumentRecord]]) -> set[int]:
        """``upsert_documents`` of several jobs in one transaction of three statements (per 1,000
        jobs); the jobs refused because they were canceled (none of their rows written)."""
        if any(record.job_id != job_id for job_id, records in documents.items() for record in records):
            raise ValueError("documents of another job given to upsert_documents_of")
        insert = self._insert(document_rows)
        replaced = {name: insert.excluded[name] for name in (*DOCUMENT_COLUMNS, "updated_at")}
        upsert = insert.on_conflict_do_update(index_elements=["job_id", "doc_index"], set_=replaced)
        canceled: set[int] = set()
        with self._write() as conn:
            now = self._now()
            for group in in_groups(sorted(documents)):
                # Locked against a cancel: no row is written for a job once it is canceled.
                locked = sa.select(job_rows.c.id, job_rows.c.status).where(job_rows.c.id.in_(group))
                statuses = {row.id: row.status for row in conn.execute(locked.with_for_update())}
                refused = {job_id for job_id in group if statuses.get(job_id) == JobStatus.CANCELED.value}
                canceled |= refused
                writing = [job_id for job_id in group if job_id not in refused]
                if not writing:
                    continue
                kept = [(job_id, r.index) for job_id in writing for r in documents[job_id]]
                stale = [document_rows.c.job_id.in_(writing)]
                if kept:
                    stale.append(sa.tuple_(document_rows.c.job_id, document_rows.c.doc_index).not_in(kept))
                conn.execute(sa.delete(document_rows).where(*stale))
                rows = [
                    {
                        **document_values(r),
                        "job_id": job_id,
                        "doc_index": r.index,
                        "created_at": now,
                        "updated_at": now,
                    }
                    for job_id in writing
                    for r in documents[job_id]
                ]
                if rows:
                    conn.execute(upsert, rows)
        return canceled

    def delete_documents(self, job_id: int) -> int:
        """Remove a job's document rows (a canceled job's outputs); how many went."""
        with self._write() as conn:
            gone = conn.execute(sa.delete(document_rows).where(document_rows.c.job_id == job_id))
            return int(gone.rowcount)

    def list_documents(self, job_id: int | None = None) -> list[DocumentRecord]:
        """Documents in (job, index) order, optionally of one job."""
        query = sa.select(document_rows).order_by(document_rows.c.job_id, document_rows.c.doc_index)
        if job_id is not None:
            query = query.where(document_rows.c.job_id == job_id)
        with self._read() as conn:
            return [document_record(row) for row in conn.execute(query)]

    def group_spellings(
        self, fields: Sequence[str] = ("counterparty", "reference")
    ) -> list[tuple[str, tuple[str, ...]]]:
        """(group key, the values of ``fields``) as documents already in a group wrote them."""
        query = (
            sa.select(document_rows.c.group_key, document_rows.c.field_values)
            .where(document_rows.c.group_key.is_not(None))
            .order_by(document_rows.c.group_key)
        )
        with self._read() as conn:
            found = {
                (key, tuple(str((values or {}).get(name) or "") for name in fields))
                for key, values in conn.execute(query)
            }
        return sorted(found)

    def put_classes_file(self, sha256: str, name: str, text: str, canonical: str) -> None:
        """Keep a classes file by its sha256; a second put of the same one changes nothing."""
        insert = self._insert(classes_files).on_conflict_do_nothing(index_elements=["sha256"])
        row = {"sha256": sha256, "name": name, "text": text, "canonical": canonical}
        with self._write() as conn:
            conn.execute(insert.values(**row, created_at=self._now()))

    def get_classes_file(self, sha256: str) -> tuple[str, str, str] | None:
        """(name, text, canonical) of a kept classes file, or None."""
        query = sa.select(classes_files.c.name, classes_files.c.text, classes_files.c.canonical).where(
            classes_files.c.sha256 == sha256
        )
        with self._read() as conn:
            row = conn.execute(query).first()
        return None if row is None else (row.name, row.text, row.canonical)

    def upsert_group(self, key: str, label: str) -> None:
        """Create the group ``key`` or update its label."""
        self.upsert_groups({key: label})

    def upsert_groups(self, labels: Mapping[str, str]) -> None:
        """``upsert_group`` of each key → label, in one statement."""
        if not labels:
            return
        insert = self._insert(groups)
        upsert = insert.on_conflict_do_update(
            index_elements=["key"],
            set_={"label": insert.excluded.label, "updated_at": insert.excluded.updated_at},
        )
        with self._write() as conn:
            now = self._now()
            rows = [
                {"key": k, "label": v, "created_at": now, "updated_at": now}
                for k, v in sorted(labels.items())
            ]
            conn.execute(upsert.values(rows))

    def list_groups(self) -> dict[str, str]:
        """Every group's key and label."""
        with self._read() as conn:
            rows = conn.execute(sa.select(groups.c.key, groups.c.label).order_by(groups.c.key))
            return {key: label for key, label in rows}

    def get_page_text(self, sha256: str, page: int, engine: str) -> PageText | None:
        """The cached text of one page read by ``engine`` (name and version), or None."""
        query = sa.select(page_ocr).where(
            page_ocr.c.sha256 == sha256, page_ocr.c.page == page, page_ocr.c.engine == engine
        )
        with self._read() as conn:
            row = conn.execute(query).first()
        return None if row is None else page_text(row)

    def cached_page_texts(self, sha256: str, pages: Sequence[int]) -> list[CachedPage]:
        """Every cached text of these pages of one source, by any engine."""
        query = sa.select(page_ocr).where(page_ocr.c.sha256 == sha256, page_ocr.c.page.in_(list(pages)))
        with self._read() as conn:
            return [CachedPage(row.engine, page_text(row)) for row in conn.execute(query)]

    def cached_page_texts_of(self, sha256s: Iterable[str]) -> dict[str, list[CachedPage]]:
        """Every cached text of every page of these sources, by any engine, by sha256 (a source
        with none: an empty list)."""
        found: dict[str, list[CachedPage]] = {sha: [] for sha in sha256s}
        with self._read() as conn:
            for group in in_groups(sorted(found)):
                for row in conn.execute(sa.select(page_ocr).where(page_ocr.c.sha256.in_(group))):
                    found[row.sha256].append(CachedPage(row.engine, page_text(row)))
        return found

    def put_page_text(self, sha256: str, engine: str, text: PageText) -> None:
        """Cache one page's text under (sha256, page, engine); a second put replaces it."""
        self.put_page_texts([(sha256, CachedPage(engine, text))])

    def put_page_texts(self, reads: Sequence[tuple[str, CachedPage]]) -> None:
        """Cache many pages' texts (each with its source's sha256) in one statement; a second put
        of a (sha256, page, engine) replaces it, as the last of those given does."""
        if not reads:
            return
        now = self._now()
        rows = {
            (sha256, read.text.page, read.engine): {
                "sha256": sha256,
                "page": read.text.page,
                "engine": read.engine,
                "text": read.text.text,
                "origin": read.text.origin,
                "confidence": read.text.confidence,
                "rotation": read.text.rotation,
                "created_at": now,
            }
            for sha256, read in reads
        }
        insert = self._insert(page_ocr)
        changed = ("text", "origin", "confidence", "rotation", "created_at")
        upsert = insert.on_conflict_do_update(
            index_elements=["sha256", "page", "engine"],
            set_={name: insert.excluded[name] for name in changed},
        )
        with self._write() as conn:
            conn.execute(upsert, list(rows.values()))

    def record_error(self, job_id: int | None, phase: str, error_class: str, message: str) -> None:
        """Log one classified failure (the message cut to a bounded length)."""
        with self._write() as conn:
            conn.execute(
                sa.insert(errors).values(
                    job_id=job_id,
                    phase=phase,
                    error_class=error_class,
                    message=clip(message),
                    created_at=self._now(),
                )
            )

    def list_errors(self, job_id: int | None = None) -> list[ErrorRecord]:
        """Logged failures, oldest first, optionally of one job."""
        query = sa.select(errors).order_by(errors.c.id)
        if job_id is not None:
            query = query.where(errors.c.job_id == job_id)
        with self._read() as conn:
            return [error_record(row) for row in conn.execute(query)]

    def is_paused(self) -> bool:
        """Whether the pause flag is set (the coordinator skips submitting and polling)."""
        return self._setting(PAUSED_KEY) == "1"

    def database_id(self) -> str:
        """This database's identity: a random id made on first use and stored in it, so that the
        outputs of databases sharing one store never collide (``raybatch.ids.OutputKeys``)."""
        known = self._setting(DATABASE_ID_KEY)
        if known is not None:
            return known
        insert = self._insert(settings).on_conflict_do_nothing(index_elements=["key"])
        with self._write() as conn:  # two first users at once: the first insert wins
            conn.execute(insert.values(key=DATABASE_ID_KEY, value=uuid.uuid4().hex, updated_at=self._now()))
        return self._setting(DATABASE_ID_KEY) or ""  # never empty: the row exists now

    def _setting(self, key: str) -> str | None:
        query = sa.select(settings.c.value).where(settings.c.key == key)
        with self._read() as conn:
            value: str | None = conn.execute(query).scalar()
        return value

    def set_paused(self, paused: bool) -> None:
        """Set or clear the pause flag."""
        insert = self._insert(settings)
        upsert = insert.on_conflict_do_update(
            index_elements=["key"],
            set_={"value": insert.excluded.value, "updated_at": insert.excluded.updated_at},
        )
        with self._write() as conn:
            conn.execute(upsert.values(key=PAUSED_KEY, value="1" if paused else "0", updated_at=self._now()))

    def get_flags(self, prefix: str) -> dict[str, str]:
        """Every stored setting whose key starts with ``prefix``."""
        query = sa.select(settings.c.key, settings.c.value).where(settings.c.key.startswith(prefix))
        with self._read() as conn:
            return {key: value for key, value in conn.execute(query)}

    def set_flags(self, values: Mapping[str, str | None]) -> None:
        """Store settings by key; None removes one."""
        insert = self._insert(settings)
        upsert = insert.on_conflict_do_update(
            index_elements=["key"],
            set_={"value": insert.excluded.value, "updated_at": insert.excluded.updated_at},
        )
        with self._write() as conn:
            for key, value in values.items():
                if value is None:
                    conn.execute(sa.delete(settings).where(settings.c.key == key))
                else:
                    conn.execute(upsert.values(key=key, value=value, updated_at=self._now()))
