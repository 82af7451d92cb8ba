"""LocalObjectStore beyond the contract: the files on disk, atomic writes, and the root's fence."""

from __future__ import annotations

import errno
import os
import pickle
import sys
from pathlib import Path
from typing import Any

import pytest

from raybatch.errors import InvalidObjectKey, StorageRejected, StorageUnavailable
from raybatch.objects import LocalObjectStore, ObjectInfo, PutObject, files


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


def test_an_object_without_metadata_whose_name_says_its_type_is_its_file_alone(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    store.put_many([
        PutObject("jobs/1/manifest.json", b"{}", "application/json"),
        PutObject("jobs/1/documents/0.txt", "ё".encode(), "text/plain; charset=utf-8"),
        PutObject("jobs/1/documents/0.webp", b"RIFF", "image/webp"),
        PutObject("jobs/1/documents/1.webp", b"RIFF", "image/png"),  # not what its name says
        PutObject("jobs/1/raw", b"x"),  # the default type, no name to say another
    ])  # fmt: skip

    assert _tree(tmp_path / "jobs/1") == [
        "documents",
        "documents/.1.webp.meta.json",
        "documents/0.txt",
        "documents/0.webp",
        "documents/1.webp",
        "manifest.json",
        "raw",
    ]
    types = {key: info.content_type for key in store.list("jobs/") if (info := store.head(key))}
    assert types == {
        "jobs/1/documents/0.txt": "text/plain; charset=utf-8",
        "jobs/1/documents/0.webp": "image/webp",
        "jobs/1/documents/1.webp": "image/png",
        "jobs/1/manifest.json": "application/json",
        "jobs/1/raw": "application/octet-stream",
    }


def test_an_object_put_again_without_metadata_loses_its_old_sidecar(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path)
    store.put("d/0.pdf", b"%PDF-1", content_type="application/pdf", metadata={"source-name": "a.pdf"})
    store.put("d/0.pdf", b"%PDF-2", content_type="application/pdf")

    assert _tree(tmp_path) == ["d", "d/0.pdf"]
    assert store.head("d/0.pdf") == ObjectInfo("d/0.pdf", 6, "application/pdf", {})


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

    monkeypatch.setattr(files, "sync_filesystem", lambda path: False)  # each file fsynced, as without syncfs
    monkeypatch.setattr(files.os, broken, fail)
    with pytest.raises(StorageUnavailable):
        store.put("a/k", b"new", content_type="application/pdf", metadata={"v": "2"})
    monkeypatch.undo()

    assert _tree(tmp_path) == before
    assert store.get("a/k") == b"old"
    info = store.head("a/k")
    assert info is not None and (info.content_type, dict(info.metadata)) == ("text/plain", {"v": "1"})


def _objects(n: int) -> list[PutObject]:
    """``n`` objects over three folders."""
    return [
        PutObject(f"jobs/{i % 3}/documents/{i}.pdf", b"new %d" % i, "application/pdf", {"i": str(i)})
        for i in range(n)
    ]


def test_put_many_syncs_the_filesystem_once_before_its_renames_and_once_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalObjectStore(tmp_path)
    seen: list[list[str]] = []  # the tree at each sync
    fsyncs: list[int] = []
    monkeypatch.setattr(files, "sync_filesystem", lambda path: seen.append(_tree(tmp_path)) or True)
    monkeypatch.setattr(files.os, "fsync", lambda fd: fsyncs.append(fd))

    store.put_many(_objects(12))

    assert len(seen) == 2 and fsyncs == [], "two syncs for twelve objects, no fsync of each file"
    staged, renamed = seen
    assert sum(name.endswith(".tmp") for name in staged) == 24 and not any(n.endswith(".pdf") for n in staged)
    assert not any(name.endswith(".tmp") for name in renamed) and renamed == _tree(tmp_path)
    for one in _objects(12):
        assert store.get(one.key) == one.data
        assert store.head(one.key) == ObjectInfo(one.key, len(one.data), "application/pdf", one.metadata)


@pytest.mark.parametrize("syncfs", ["missing", "failing"])
def test_without_syncfs_put_many_fsyncs_each_file_and_each_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, syncfs: str
) -> None:
    store = LocalObjectStore(tmp_path)
    monkeypatch.setattr(files, "_syncfs", lambda: None if syncfs == "missing" else (lambda fd: -1))
    fsync, fsyncs = os.fsync, list[int]()
    monkeypatch.setattr(files.os, "fsync", lambda fd: fsyncs.append(fd) or fsync(fd))

    store.put_many(_objects(12))

    assert len(fsyncs) == 2 * 12 + 3, "each object and its sidecar, then each of the three folders"
    assert [store.get(one.key) for one in _objects(12)] == [one.data for one in _objects(12)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="syncfs(2) is Linux's")
def test_the_filesystem_is_synced_with_syncfs_on_linux(tmp_path: Path) -> None:
    assert files.sync_filesystem(tmp_path) is True
    assert files.sync_filesystem(tmp_path / "missing") is False


@pytest.mark.parametrize("broken", ["stage", "replace"])
def test_a_put_many_failing_midway_leaves_no_temp_file_and_no_part_of_an_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    """Staging the 3rd object fails: nothing new is put. A rename fails midway: the objects renamed
    before it stand whole (the set is not atomic), the others keep their old bytes and metadata."""
    store = LocalObjectStore(tmp_path)
    for one in _objects(5):
        store.put(one.key, b"old", content_type="text/plain", metadata={"v": "old"})
    before = _tree(tmp_path)
    calls: list[Any] = []

    def fail_fifth(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        if len(calls) == 5:  # the 3rd object's data file
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(*args, **kwargs)

    original = files.stage if broken == "stage" else os.replace
    monkeypatch.setattr(*((files, "stage") if broken == "stage" else (files.os, "replace")), fail_fifth)
    with pytest.raises(StorageUnavailable):
        store.put_many(_objects(5))
    monkeypatch.undo()

    assert _tree(tmp_path) == before, "no temp file left behind"
    renamed = 0 if broken == "stage" else 2  # renames 1-4: two objects with their sidecars
    for n, one in enumerate(_objects(5)):
        info = store.head(one.key)
        assert info is not None
        got = (store.get(one.key), info.content_type, dict(info.metadata))
        old = (b"old", "text/plain", {"v": "old"})
        assert got == ((one.data, "application/pdf", dict(one.metadata)) if n < renamed else old)


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
    assert _tree(tmp_path) == ["a"]


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
        "application/pdf",
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
