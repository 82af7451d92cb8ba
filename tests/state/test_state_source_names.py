"""Any file name the OS allows becomes a job whose name is kept as plain text, on every backend."""

from __future__ import annotations

import os
from pathlib import Path

import pymupdf

from raybatch.ids import sha256_bytes
from raybatch.models import JobStatus
from raybatch.register import Registrar
from raybatch.settings import StoreSettings
from raybatch.sources import list_sources
from raybatch.state import SqlStateStore

NAMES = {
    b"caf\xe9 latin-1.pdf": "caf\\xe9 latin-1.pdf",
    b"two\nlines\r.pdf": "two\\nlines\\r.pdf",
    b"tab\tand\x7fdel.pdf": "tab\\tand\\x7fdel.pdf",
    b"y" * 251 + b".pdf": "y" * 251 + ".pdf",
}


def one_page_pdf(text: str) -> bytes:
    with pymupdf.open() as doc:
        doc.new_page().insert_text((72, 72), text)
        return doc.tobytes()


def test_odd_file_names_register_with_their_names_kept(store: SqlStateStore, tmp_path: Path) -> None:
    for i, raw in enumerate(NAMES):
        with open(os.path.join(os.fsencode(tmp_path), raw), "wb") as handle:
            handle.write(one_page_pdf(f"file {i}"))
    listing = list_sources(str(tmp_path), StoreSettings())
    registered = Registrar(store, StoreSettings(), max_page_pixels=10**8).register_all(listing.files)
    jobs = [store.get_job(r.job.id) for r in registered]
    assert sorted(j.source_name for j in jobs) == sorted(NAMES.values())
    assert all(j.status is JobStatus.PENDING and j.pages == 1 for j in jobs)


def test_a_link_out_of_the_folder_fails_its_job_with_the_reason(store: SqlStateStore, tmp_path: Path) -> None:
    root, outside = tmp_path / "in", tmp_path / "private"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.pdf").write_bytes(one_page_pdf("not yours"))
    (root / "link.pdf").symlink_to(outside / "secret.pdf")
    listing = list_sources(str(root), StoreSettings())
    [registered] = Registrar(store, StoreSettings(), max_page_pixels=10**8).register_all(listing.files)
    job = store.get_job(registered.job.id)
    assert job.status is JobStatus.FAILED
    assert (job.error_message or "").startswith("linked: ")
    assert job.sha256 != sha256_bytes((outside / "secret.pdf").read_bytes())  # never read


def test_a_moved_file_is_read_from_where_it_is_now_and_a_rerun_takes_it_up(
    store: SqlStateStore, tmp_path: Path
) -> None:
    """The same content registered from a new place moves its job there; a job that failed for
    where the file was (gone) is taken up again by that registration."""
    old, new = tmp_path / "in", tmp_path / "sorted"
    old.mkdir()
    new.mkdir()
    (old / "scan.pdf").write_bytes(one_page_pdf("moved"))
    registrar = Registrar(store, StoreSettings(), max_page_pixels=10**8)
    [first] = registrar.register_all(list_sources(str(old), StoreSettings()).files)
    (old / "scan.pdf").rename(new / "renamed.pdf")
    store.fail_job(first.job.id, "prepare", "InvalidSource", "unreadable: cannot read source file: gone")
    [again] = registrar.register_all(list_sources(str(new), StoreSettings()).files)
    job = store.get_job(again.job.id)
    assert job.id == first.job.id
    assert (job.source_uri, job.source_name) == ((new / "renamed.pdf").as_uri(), "renamed.pdf")
    assert (job.status, job.attempts, job.error_class) == (JobStatus.PENDING, 0, None)
    assert [j.id for j in store.jobs_from_source(new.as_uri())] == [job.id]
