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
