"""Sources: folders, lists of paths and S3 prefixes list and read back the same bytes, or refuse
with a reason: links out of the folder, non-regular files, bytes that changed since registration."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from raybatch.errors import ConfigError, InvalidSource
from raybatch.ids import sha256_bytes
from raybatch.settings import StoreSettings
from raybatch.sources import list_sources, read_source, safe_name


def test_folder_lists_pdfs_and_images_and_skips_the_rest(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.pdf").write_bytes(b"%PDF-1.4 a")
    (tmp_path / "sub" / "b #1?.PNG").write_bytes(b"png")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / ".hidden.pdf").write_bytes(b"%PDF")
    listing = list_sources(str(tmp_path), StoreSettings())
    assert [f.name for f in listing.files] == ["a.pdf", "b #1?.PNG"]
    assert listing.skipped == ["notes.txt"]
    assert read_source(listing.files[1].uri, StoreSettings()) == b"png"


def test_list_of_paths_and_missing_files(tmp_path: Path) -> None:
    path = tmp_path / "x.pdf"
    path.write_bytes(b"%PDF")
    assert [f.size for f in list_sources([str(path)], StoreSettings()).files] == [4]
    with pytest.raises(ConfigError, match="does not exist"):
        list_sources([str(tmp_path / "nope.pdf")], StoreSettings())
    uri = (tmp_path / "gone.pdf").as_uri()
    with pytest.raises(InvalidSource, match="cannot read"):
        read_source(uri, StoreSettings())


def test_s3_prefix_lists_user_names_and_reads_them(s3_server) -> None:
    bucket = s3_server.new_bucket()
    client = s3_server.client()
    import io

    for name, data in [("in/2024 Q1/счёт #1.pdf", b"%PDF-1"), ("in/b.tif", b"II*"), ("other/c.pdf", b"x")]:
        client.put_object(bucket, name, io.BytesIO(data), len(data))
    settings = s3_server.store_settings(bucket)
    listing = list_sources(f"s3://{bucket}/in/", settings)
    assert sorted(f.name for f in listing.files) == ["b.tif", "счёт #1.pdf"]
    by_name = {f.name: f for f in listing.files}
    assert read_source(by_name["счёт #1.pdf"].uri, settings) == b"%PDF-1"


class Listed:
    """What an S3 listing yields: an object's name and size."""

    def __init__(self, name: str) -> None:
        self.object_name, self.size, self.is_dir = name, 1, False


def test_an_s3_listing_is_consumed_page_by_page() -> None:
    from raybatch.sources import list_pages

    keys = [f"in/{n:05d}.pdf" for n in range(2500)]
    requests: list[str | None] = []

    def list_objects(bucket: str, *, prefix: str, recursive: bool, start_after: str | None):  # type: ignore[no-untyped-def]
        requests.append(start_after)
        yield from (Listed(k) for k in keys if start_after is None or k > start_after)

    pages = list_pages(list_objects, "b", "in/", page_size=1000)
    first = [next(pages).object_name for _ in range(3)]
    assert first == keys[:3] and requests == [None]  # one page asked for, not the whole prefix
    rest = [o.object_name for o in pages]
    assert first + rest == keys
    assert requests == [None, keys[999], keys[1999]]


def test_s3_listing_pages_on_a_real_server(s3_server) -> None:
    import io

    from raybatch.sources import iter_sources

    bucket = s3_server.new_bucket()
    client = s3_server.client()
    names = [f"in/{n:02d}.pdf" for n in range(25)] + ["in/readme.txt"]
    for name in names:
        client.put_object(bucket, name, io.BytesIO(b"%PDF"), 4)
    skipped: list[str] = []
    settings = s3_server.store_settings(bucket)
    files = iter_sources(f"s3://{bucket}/in/", settings, on_skip=skipped.append, page_size=10)
    assert [f.name for f in files] == [f"{n:02d}.pdf" for n in range(25)]
    assert skipped == ["readme.txt"]


def test_a_link_out_of_the_folder_is_listed_but_never_read(tmp_path: Path) -> None:
    root, outside = tmp_path / "in", tmp_path / "private"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.pdf").write_bytes(b"%PDF secret")
    (root / "own.pdf").write_bytes(b"%PDF own")
    (root / "out.pdf").symlink_to(outside / "secret.pdf")
    (root / "alias.pdf").symlink_to(root / "own.pdf")
    (root / "sub" / "folder").symlink_to(outside, target_is_directory=True)
    listing = list_sources(str(root), StoreSettings())
    by_name = {f.name: f for f in listing.files}
    assert sorted(by_name) == ["alias.pdf", "out.pdf", "own.pdf"]  # a linked folder is not entered
    assert read_source(by_name["alias.pdf"].uri, StoreSettings()) == b"%PDF own"  # stays inside
    with pytest.raises(InvalidSource, match=r"^linked: .*links are not followed"):
        read_source(by_name["out.pdf"].uri, StoreSettings())


def test_a_file_replaced_by_a_link_after_listing_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secret.pdf").write_bytes(b"%PDF secret")
    path = tmp_path / "a.pdf"
    path.write_bytes(b"%PDF a")
    [source] = list_sources([str(path)], StoreSettings()).files
    path.unlink()
    path.symlink_to(tmp_path / "secret.pdf")
    with pytest.raises(InvalidSource, match=r"^linked: "):
        read_source(source.uri, StoreSettings())


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.pdf"
    os.mkfifo(fifo)
    assert list_sources(str(tmp_path), StoreSettings()).files == []
    with pytest.raises(InvalidSource, match=r"^not-a-file: "):
        read_source(fifo.as_uri(), StoreSettings())


def test_bytes_read_again_are_checked_against_the_registered_sha256(tmp_path: Path) -> None:
    path = tmp_path / "a.pdf"
    path.write_bytes(b"%PDF first")
    uri = path.as_uri()
    assert read_source(uri, StoreSettings(), sha256=sha256_bytes(b"%PDF first")) == b"%PDF first"
    path.write_bytes(b"%PDF other")  # same size, other bytes
    with pytest.raises(InvalidSource, match=r"^changed: the file's bytes are no longer those registered"):
        read_source(uri, StoreSettings(), sha256=sha256_bytes(b"%PDF first"))


def test_s3_sources_are_checked_by_sha256_too(s3_server) -> None:
    bucket = s3_server.new_bucket()
    client = s3_server.client()
    import io

    client.put_object(bucket, "in/a.pdf", io.BytesIO(b"%PDF-1"), 6)
    settings = s3_server.store_settings(bucket)
    [source] = list_sources(f"s3://{bucket}/in/", settings).files
    client.put_object(bucket, "in/a.pdf", io.BytesIO(b"%PDF-2"), 6)
    with pytest.raises(InvalidSource, match=r"^changed: "):
        read_source(source.uri, settings, sha256=sha256_bytes(b"%PDF-1"))


NAMES = {
    b"caf\xe9 latin-1.pdf": "caf\\xe9 latin-1.pdf",
    b"two\nlines.pdf": "two\\nlines.pdf",
    "Договор №7 \u202eexe.pdf".encode(): "Договор №7 \\u202eexe.pdf",
    b"x" * 251 + b".pdf": "x" * 251 + ".pdf",
}


def test_any_file_name_is_listed_as_safe_text_and_read_back(tmp_path: Path) -> None:
    for i, raw in enumerate(NAMES):
        with open(os.path.join(os.fsencode(tmp_path), raw), "wb") as handle:
            handle.write(b"%%PDF %d" % i)
    listing = list_sources(str(tmp_path), StoreSettings())
    assert sorted(f.name for f in listing.files) == sorted(NAMES.values())
    for source in listing.files:
        source.name.encode("utf-8")  # plain text: any database, log line or metadata value takes it
        raw = next(r for r, shown in NAMES.items() if shown == source.name)
        assert read_source(source.uri, StoreSettings()) == b"%%PDF %d" % list(NAMES).index(raw)


def test_safe_name_leaves_ordinary_names_alone() -> None:
    assert safe_name("счёт #1 (copy).PDF") == "счёт #1 (copy).PDF"
    assert safe_name(os.fsdecode(b"a\xff.pdf")) == "a\\xff.pdf"


def test_an_s3_key_starting_with_a_slash_is_read_as_itself(s3_server) -> None:
    import io

    bucket = s3_server.new_bucket()
    client = s3_server.client()
    client.put_object(bucket, "/x.pdf", io.BytesIO(b"%PDF-lead"), 9)
    client.put_object(bucket, "x.pdf", io.BytesIO(b"%PDF-plain"), 10)
    settings = s3_server.store_settings(bucket)
    by_uri = {f.uri: f for f in list_sources(f"s3://{bucket}/", settings).files}
    assert sorted(by_uri) == [f"s3://{bucket}//x.pdf", f"s3://{bucket}/x.pdf"]
    assert read_source(f"s3://{bucket}//x.pdf", settings) == b"%PDF-lead"
    assert read_source(f"s3://{bucket}/x.pdf", settings) == b"%PDF-plain"
