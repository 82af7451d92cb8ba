"""Sources: folders, lists of paths and S3 prefixes list and read back the same bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from raybatch.errors import ConfigError, InvalidSource
from raybatch.settings import StoreSettings
from raybatch.sources import list_sources, read_source


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
