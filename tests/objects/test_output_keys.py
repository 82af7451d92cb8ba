"""Output keys: every key of one database lies under its own root, disjoint from another's."""

from __future__ import annotations

from pathlib import Path

import pytest

from raybatch.ids import OutputKeys
from raybatch.objects import LocalObjectStore
from raybatch.objects.keys import validate_key
from raybatch.prepared import PreparedRequests
from raybatch.steps.build_requests import prepared_request
from raybatch.work.prepared_chunk import PreparedChunk

FIRST, SECOND = OutputKeys("0" * 32), OutputKeys("f" * 32)


def every_key(keys: OutputKeys) -> list[str]:
    return [
        keys.document_pdf(1, 0),
        keys.document_thumb(1, 0),
        keys.manifest(1),
        keys.source(1),
        keys.document_text(1, 0),
        f"{keys.documents_table}/part-20261201T000000000000Z-0123456789ab.parquet",
        keys.prepared_request(1, 0),
    ]


def test_the_same_job_of_two_databases_has_disjoint_keys() -> None:
    assert not set(every_key(FIRST)) & set(every_key(SECOND))
    for keys in (FIRST, SECOND):
        for key in every_key(keys):
            assert validate_key(key).startswith(keys.root + "/")


def test_listing_one_jobs_prefix_never_reaches_another_database() -> None:
    assert FIRST.job_prefix(1).startswith(FIRST.jobs)
    assert not FIRST.job_prefix(1).startswith(SECOND.root)
    assert not FIRST.documents_table.startswith(FIRST.jobs)
    assert not FIRST.job_prefix(1).startswith(FIRST.job_prefix(10))
    assert FIRST.prepared_request(1, 0).startswith(FIRST.prepared(1))
    assert FIRST.prepared(1).startswith(FIRST.job_prefix(1) + "/")


@pytest.mark.parametrize("bad", ["", "short", "../../x", "DB" * 8, "g" * 32, "0" * 65])
def test_a_database_id_is_plain_hex(bad: str) -> None:
    with pytest.raises(ValueError, match="hex"):
        OutputKeys(bad)


def test_prepared_requests_are_kept_under_their_database(tmp_path: Path) -> None:
    store = LocalObjectStore(str(tmp_path))
    request = prepared_request("job_1_batch_0", 1, 0, 1, 8, "key-1", {"model": "m"})
    PreparedRequests(store, FIRST).save(PreparedChunk(request=request, rotations={2: 90}))
    assert list(store.list(FIRST.prepared(1))) == [FIRST.prepared_request(1, 0)]
    assert PreparedRequests(store, SECOND).load(1, 0, "key-1") is None  # another database's
    assert PreparedRequests(store, FIRST).load(1, 0, "key-2") is None  # another processing key
    kept = PreparedRequests(store, FIRST).load(1, 0, "key-1")
    assert kept is not None and kept.request == request and kept.rotations == {2: 90}
