"""The object-store contract: one suite, run on the fake, a local folder and S3 (moto via minio)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from raybatch.errors import InvalidObjectKey, ObjectNotFound, PermanentError
from raybatch.objects import DEFAULT_CONTENT_TYPE, LocalObjectStore, ObjectInfo, ObjectStore, PutObject

HOSTILE_VALUES = {
    "traversal": "../../etc/x",
    "absolute": "/etc/passwd",
    "long": "имя-" + "x" * 1996,
    "cyrillic": "Договор поставки №17 от 01.02.2024 (копия).pdf",
    "newlines": "line one\nline two\r\nline three\r",
    "percent": "%41%%zz % 100%",
    "spaces": "  padded  ",
    "controls": "nul\x00tab\tbell\x07",
    "emoji": "счёт 📄 ✓",
    "empty": "",
    "backslash": "C:\\Users\\x\\file.pdf",
    "quotes": "\"quoted\" 'single' <xml> &amp;",
}

INVALID_KEYS = [
    "",
    "../../etc/x",
    "../escape",
    "a/../../b",
    "/etc/passwd",
    "a\\b",
    "..\\..\\windows",
    "a//b",
    "a/",
    "./a",
    "a/./b",
    ".hidden",
    "a/.meta",
    "x" * 2000,
    "a/" + "b" * 201,
    "space in name",
    "имя.pdf",
    "new\nline",
    "nul\x00",
]


def test_put_get_head(store: ObjectStore) -> None:
    store.put("jobs/1/documents/0.pdf", b"%PDF-1.7 body", content_type="application/pdf")

    assert store.get("jobs/1/documents/0.pdf") == b"%PDF-1.7 body"
    assert store.exists("jobs/1/documents/0.pdf")
    assert store.head("jobs/1/documents/0.pdf") == ObjectInfo(
        key="jobs/1/documents/0.pdf", size=13, content_type="application/pdf", metadata={}
    )


def test_defaults_and_empty_object(store: ObjectStore) -> None:
    store.put("empty", b"")

    info = store.head("empty")
    assert info is not None
    assert (info.size, info.content_type, dict(info.metadata)) == (0, DEFAULT_CONTENT_TYPE, {})
    assert store.get("empty") == b""


def test_overwrite_replaces_bytes_type_and_metadata(store: ObjectStore) -> None:
    store.put("k", b"old", content_type="text/plain", metadata={"source_name": "old.pdf", "extra": "1"})
    store.put("k", b"new bytes", content_type="application/json; charset=utf-8")

    assert store.get("k") == b"new bytes"
    info = store.head("k")
    assert info is not None
    assert (info.size, info.content_type, dict(info.metadata)) == (
        9,
        "application/json; charset=utf-8",
        {},
    )
    assert list(store.list()) == ["k"]


def test_small_metadata_round_trips(store: ObjectStore) -> None:
    metadata = {"source_name": "Счёт № 5.pdf", "sha256": "ab" * 32, "pages": "12"}
    store.put("a", b"x", metadata=metadata)

    info = store.head("a")
    assert info is not None and dict(info.metadata) == metadata


@pytest.mark.parametrize("name", sorted(HOSTILE_VALUES))
def test_hostile_metadata_value_round_trips(store: ObjectStore, name: str) -> None:
    value = HOSTILE_VALUES[name]
    store.put("jobs/7/source", b"pdf", metadata={"source_name": value})

    info = store.head("jobs/7/source")
    assert info is not None and dict(info.metadata) == {"source_name": value}
    assert list(store.list()) == ["jobs/7/source"]


def test_all_hostile_values_together_round_trip(store: ObjectStore) -> None:
    store.put("many", b"x", metadata=HOSTILE_VALUES)

    info = store.head("many")
    assert info is not None and dict(info.metadata) == HOSTILE_VALUES
    assert list(store.list()) == ["many"]


def test_overwrite_from_large_to_small_metadata(store: ObjectStore) -> None:
    store.put("k", b"1", metadata={"name": "ж" * 3000})
    store.put("k", b"2", metadata={"name": "short"})

    info = store.head("k")
    assert info is not None and dict(info.metadata) == {"name": "short"}


def test_list_is_sorted_and_filtered_by_prefix(store: ObjectStore) -> None:
    keys = ["jobs/10/manifest.json", "jobs/2/a.pdf", "jobs/1/b.pdf", "jobs/1/a.pdf", "tables/x", "jobsx"]
    for key in keys:
        store.put(key, key.encode(), metadata={"name": "ж" * 3000})

    assert list(store.list()) == sorted(keys)
    assert list(store.list("jobs/1/")) == ["jobs/1/a.pdf", "jobs/1/b.pdf"]
    assert list(store.list("jobs/1")) == ["jobs/1/a.pdf", "jobs/1/b.pdf", "jobs/10/manifest.json"]
    assert list(store.list("jobs")) == sorted([*keys[:-2], "jobsx"])
    assert list(store.list("jobs/1/a")) == ["jobs/1/a.pdf"]
    assert list(store.list("nothing/")) == []


def test_delete_removes_and_is_idempotent(store: ObjectStore) -> None:
    store.put("a/b", b"1", metadata={"name": "ж" * 3000})
    store.put("a/c", b"2")

    store.delete("a/b")
    store.delete("a/b")
    store.delete("never/there")

    assert store.head("a/b") is None
    assert not store.exists("a/b")
    assert list(store.list()) == ["a/c"]
    with pytest.raises(ObjectNotFound):
        store.get("a/b")


def test_missing_key(store: ObjectStore, tmp_path: Path) -> None:
    assert store.head("no/such/key") is None
    assert not store.exists("no/such/key")
    with pytest.raises(ObjectNotFound):
        store.get("no/such/key")
    with pytest.raises(ObjectNotFound):
        store.get_file("no/such/key", tmp_path / "out.bin")
    assert not (tmp_path / "out.bin").exists()


def test_a_key_prefix_of_another_key_is_not_an_object(store: ObjectStore) -> None:
    store.put("a/b/c", b"deep")

    assert store.head("a/b") is None
    with pytest.raises(ObjectNotFound):
        store.get("a")


@pytest.mark.parametrize("key", INVALID_KEYS, ids=range(len(INVALID_KEYS)))
def test_invalid_keys_are_refused_before_storage(store: ObjectStore, key: str, tmp_path: Path) -> None:
    source = tmp_path / "source.bin"
    source.write_bytes(b"x")
    calls = [
        lambda: store.put(key, b"x", metadata={"name": key}),
        lambda: store.put_file(key, source),
        lambda: store.get(key),
        lambda: store.get_file(key, tmp_path / "out"),
        lambda: store.head(key),
        lambda: store.exists(key),
        lambda: store.delete(key),
        lambda: store.uri(key),
    ]
    for call in calls:
        with pytest.raises(InvalidObjectKey) as caught:
            call()
        assert isinstance(caught.value, ValueError) and isinstance(caught.value, PermanentError)

    assert list(store.list()) == []
    assert not (tmp_path / "out").exists()


def test_invalid_keys_write_nothing_anywhere_on_disk(tmp_path: Path) -> None:
    root = tmp_path / "deep" / "root"
    store = LocalObjectStore(root)

    for key in INVALID_KEYS:
        with pytest.raises(InvalidObjectKey):
            store.put(key, b"x", metadata={"name": key})

    assert list(tmp_path.rglob("*")) == []


@pytest.mark.parametrize("prefix", ["../", "/abs", "a//", "a\\b", "x" * 600, "a/../b/"])
def test_invalid_prefixes_are_refused(store: ObjectStore, prefix: str) -> None:
    with pytest.raises(InvalidObjectKey):
        list(store.list(prefix))


@pytest.mark.parametrize(
    "metadata",
    [
        {"Upper": "x"},
        {"with space": "x"},
        {"dotted.name": "x"},
        {"": "x"},
        {"_leading": "x"},
        {"имя": "x"},
        {"raybatch-sidecar": "x"},
        {"n" * 65: "x"},
        {"name": 5},
        {"name": "lone \ud800 surrogate"},
        {"name": "x" * 70_000},
    ],
    ids=range(11),
)
def test_invalid_metadata_is_refused(store: ObjectStore, metadata: dict) -> None:
    with pytest.raises(InvalidObjectKey):
        store.put("k", b"x", metadata=metadata)
    assert list(store.list()) == []


@pytest.mark.parametrize("content_type", ["", "text/plain\r\nX-Injected: 1", "тип/вид", "a" * 300, " lead"])
def test_invalid_content_types_are_refused(store: ObjectStore, content_type: str) -> None:
    with pytest.raises(InvalidObjectKey):
        store.put("k", b"x", content_type=content_type)
    assert list(store.list()) == []


def test_put_many_stores_each_object_with_its_type_and_metadata(store: ObjectStore) -> None:
    store.put_many(
        [
            PutObject("jobs/1/documents/0.pdf", b"%PDF", "application/pdf", {"source_name": "счёт.pdf"}),
            PutObject("jobs/1/documents/0.webp", b"RIFF", "image/webp"),
            PutObject("jobs/2/manifest.json", b"{}", "application/json", {"job-id": "2"}),
        ]
    )

    assert store.get("jobs/1/documents/0.pdf") == b"%PDF"
    assert store.head("jobs/1/documents/0.pdf") == ObjectInfo(
        "jobs/1/documents/0.pdf", 4, "application/pdf", {"source_name": "счёт.pdf"}
    )
    assert store.head("jobs/1/documents/0.webp") == ObjectInfo("jobs/1/documents/0.webp", 4, "image/webp", {})
    assert store.get("jobs/2/manifest.json") == b"{}"
    assert list(store.list()) == ["jobs/1/documents/0.pdf", "jobs/1/documents/0.webp", "jobs/2/manifest.json"]
    store.put_many([])
    assert len(list(store.list())) == 3


def test_put_many_replaces_existing_objects(store: ObjectStore) -> None:
    store.put("a/k", b"old a", content_type="text/plain", metadata={"v": "1"})
    store.put("b/k", b"old b", metadata={"v": "1"})

    store.put_many(
        [PutObject("a/k", b"new a", "application/pdf"), PutObject("b/k", b"new b", metadata={"v": "2"})]
    )

    assert (store.get("a/k"), store.get("b/k")) == (b"new a", b"new b")
    assert store.head("a/k") == ObjectInfo("a/k", 5, "application/pdf", {})
    assert store.head("b/k") == ObjectInfo("b/k", 5, DEFAULT_CONTENT_TYPE, {"v": "2"})


@pytest.mark.parametrize(
    "bad",
    [
        PutObject("../escape", b"x"),
        PutObject("k3", b"x", content_type="text/plain\r\nX-Injected: 1"),
        PutObject("k3", b"x", metadata={"Upper": "x"}),
    ],
    ids=["key", "content-type", "metadata"],
)
def test_put_many_refuses_the_whole_call_for_one_invalid_object(
    store: ObjectStore, bad: PutObject, tmp_path: Path
) -> None:
    with pytest.raises(InvalidObjectKey):
        store.put_many([PutObject("k1", b"1"), PutObject("k2", b"2"), bad, PutObject("k4", b"4")])

    assert list(store.list()) == []
    if isinstance(store, LocalObjectStore):
        assert not store.root.exists(), "nothing was written on disk, not even the root"


def test_files_stream_in_and_out(store: ObjectStore, tmp_path: Path) -> None:
    # Above the minio SDK's 5 MiB part size, so S3 takes the multipart path.
    payload = bytes(range(256)) * (6 * 4096 + 3)
    source = tmp_path / "big.pdf"
    source.write_bytes(payload)

    store.put_file(
        "jobs/3/source", source, content_type="application/pdf", metadata={"source_name": "big.pdf"}
    )
    store.get_file("jobs/3/source", tmp_path / "copy" / "back.pdf")

    assert (tmp_path / "copy" / "back.pdf").read_bytes() == payload
    info = store.head("jobs/3/source")
    assert info is not None
    assert (info.size, info.content_type, dict(info.metadata)) == (
        len(payload),
        "application/pdf",
        {"source_name": "big.pdf"},
    )
    assert [p.name for p in (tmp_path / "copy").iterdir()] == ["back.pdf"]


def test_get_file_replaces_an_existing_file(store: ObjectStore, tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    target.write_bytes(b"stale content, longer than the new one")
    store.put("k", b"fresh")

    store.get_file("k", target)

    assert target.read_bytes() == b"fresh"


def test_pickled_store_works_and_sees_existing_objects(store: ObjectStore) -> None:
    store.put("before", b"1", metadata={"name": "ж" * 3000})

    copy = pickle.loads(pickle.dumps(store))
    copy.put("after", b"2")

    assert copy.get("before") == b"1"
    info = copy.head("before")
    assert info is not None and dict(info.metadata) == {"name": "ж" * 3000}
    assert copy.get("after") == b"2"
    assert copy.uri("before") == store.uri("before")


def test_uri_names_the_key(store: ObjectStore) -> None:
    uri = store.uri("jobs/1/documents/0.pdf")

    assert uri.endswith("jobs/1/documents/0.pdf")
