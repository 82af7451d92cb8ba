"""Output keys: every key of one database lies under its own root, disjoint from another's."""

from __future__ import annotations

import pytest

from raybatch.ids import OutputKeys
from raybatch.objects.keys import validate_key

FIRST, SECOND = OutputKeys("0" * 32), OutputKeys("f" * 32)


def every_key(keys: OutputKeys) -> list[str]:
    return [
        keys.document_pdf(1, 0),
        keys.document_thumb(1, 0),
        keys.manifest(1),
        keys.source(1),
        keys.documents_table_part(1),
    ]


def test_the_same_job_of_two_databases_has_disjoint_keys() -> None:
    assert not set(every_key(FIRST)) & set(every_key(SECOND))
    for keys in (FIRST, SECOND):
        for key in every_key(keys):
            assert validate_key(key).startswith(keys.root + "/")


def test_listing_one_jobs_prefix_never_reaches_another_database() -> None:
    assert FIRST.job_prefix(1).startswith(FIRST.jobs)
    assert not FIRST.job_prefix(1).startswith(SECOND.root)
    assert not FIRST.documents_table_part(1).startswith(FIRST.jobs)
    assert not FIRST.job_prefix(1).startswith(FIRST.job_prefix(10))


@pytest.mark.parametrize("bad", ["", "short", "../../x", "DB" * 8, "g" * 32, "0" * 65])
def test_a_database_id_is_plain_hex(bad: str) -> None:
    with pytest.raises(ValueError, match="hex"):
        OutputKeys(bad)
