"""LocalObjectStore beyond the contract: the files on disk, atomic writes, and the root's fence."""

from __future__ import annotations

import errno
import os
import pickle
from pathlib import Path

import pytest

from raybatch.errors import InvalidObjectKey, StorageRejected, StorageUnavailable
from raybatch.objects import LocalObjectStore, files


def _tree(folder: Path) -> list[str]:
    """Every entry under ``folder``, hidden ones included."""
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


def test_objects_are_plain_files_with_a_hidden_sidecar(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    store.put("jobs/1/documents/0.pdf", b"%PDF", content_type="application/pdf", metadata={"n": "ж"})

    assert (tmp_path / "jobs/1/documents/0.pdf").read_bytes() == b"%PDF"
    assert _tree(tmp_path) == [
        "jobs",
        "jobs/1",
        "jobs/1/documents",
        "jobs/1/documents/.0.pdf.meta.json",
        "jobs/1/documents/0.pdf",
    ]
    assert store.uri("jobs/1/documents/0.pdf") == str(tmp_path / "jobs/1/documents/0.pdf")


def test_a_symlink_out_of_the_root_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "link").symlink_to(outside)
    store = LocalObjectStore(tmp_path / "root")

    with pytest.raises(InvalidObjectKey):
        store.put("link/x", b"escaped")
    with pytest.raises(InvalidObjectKey):
        store.get("link/x")

    assert _tree(outside) == []


@pytest.mark.parametrize("broken", ["fsync", "replace"])
def test_a_failed_write_keeps_the_old_object_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    store = LocalObjectStore(tmp_path)
    store.put("a/k", b"old", content_type="text/plain", metadata={"v": "1"})
    before = _tree(tmp_path)

    def fail(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, broken, fail)
    with pytest.raises(StorageUnavailable):
        store.put("a/k", b"new", content_type="application/pdf", metadata={"v": "2"})
    monkeypatch.undo()

    assert _tree(tmp_path) == before
    assert store.get("a/k") == b"old"
    info = store.head("a/k")
    assert info is not None and (info.content_type, dict(info.metadata)) == ("text/plain", {"v": "1"})


def test_an_interrupted_stream_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "k"
    target.write_bytes(b"old")

    def chunks():
        yield b"partial"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        files.write_atomic(target, chunks())

    assert _tree(tmp_path) == ["k"]
    assert target.read_bytes() == b"old"


def test_a_file_where_a_folder_should_be_is_permanent(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    store.put("a", b"file")

    with pytest.raises(StorageRejected):
        store.put("a/b", b"x")
    assert _tree(tmp_path) == [".a.meta.json", "a"]


def test_files_placed_by_hand_are_listed_when_their_names_are_keys(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    for name in ["good.pdf", "with space.pdf", ".hidden", "имя.pdf"]:
        (tmp_path / "in" / name).write_bytes(b"x")
    (tmp_path / ".private").mkdir()
    (tmp_path / ".private" / "x").write_bytes(b"x")
    store = LocalObjectStore(tmp_path)

    assert list(store.list()) == ["in/good.pdf"]
    info = store.head("in/good.pdf")
    assert info is not None and (info.size, info.content_type, dict(info.metadata)) == (
        1,
        "application/octet-stream",
        {},
    )


def test_a_relative_root_is_fixed_at_construction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = LocalObjectStore("store")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")

    pickle.loads(pickle.dumps(store)).put("k", b"x")

    assert (tmp_path / "store" / "k").read_bytes() == b"x"
    assert store == LocalObjectStore(tmp_path / "store")


def test_objects_folders_and_the_sqlite_file_are_their_owners_alone(tmp_path: Path) -> None:
    """Whatever the umask: the store's files 0o600, its folders 0o700, a new SQLite file 0o600."""
    from raybatch.settings import StateSettings
    from raybatch.state import open_state

    old = os.umask(0o022)
    try:
        store = LocalObjectStore(tmp_path / "store")
        store.put("db-1/jobs/1/documents/0.txt", b"page text", content_type="text/plain")
        open_state(StateSettings(database_url=f"sqlite:///{tmp_path / 'home' / 'state.db'}"))
    finally:
        os.umask(old)
    made = [p for p in (tmp_path / "store").rglob("*")] + [tmp_path / "store", tmp_path / "home"]
    made += list((tmp_path / "home").iterdir())
    assert len(made) > 6
    loose = {
        str(p.relative_to(tmp_path)): oct(p.stat().st_mode & 0o777) for p in made if p.stat().st_mode & 0o077
    }
    assert loose == {}
