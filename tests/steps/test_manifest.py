"""Manifest: sorted, stable JSON with the job, its documents, groups, tokens and cost."""

from __future__ import annotations

import json

import pytest

from raybatch.models import DocumentRecord, JobRecord, JobStatus, SourceKind, Usage
from raybatch.steps.group import group_key
from raybatch.steps.manifest import (
    TokenPrices,
    build_manifest,
    estimate_cost_usd,
    total_usage,
)

JOB = JobRecord(
    id=12, sha256="ab" * 32, source_uri="s3://in/scans/Счёт 2024.pdf", source_name="Счёт 2024.pdf",
    kind=SourceKind.PDF, size_bytes=123_456, status=JobStatus.WRITING, mode="batch", pages=10,
)
KEY = group_key("ООО «Ромашка»", "Д-15/2024")


def _docs() -> list[DocumentRecord]:
    return [
        DocumentRecord(
            job_id=12, index=1, first_page=3, last_page=10, doc_type="invoice", title="Счёт № 7",
            date="2024-03-01", number="7", counterparty="ООО «Ромашка»", amount=1500.5, currency="RUB",
            reference="Д-15/2024", fields={"inn": "7701"}, group_key=KEY,
            pdf_key="jobs/12/documents/1.pdf", thumb_key="jobs/12/documents/1.webp",
        ),
        DocumentRecord(
            job_id=12, index=0, first_page=1, last_page=2, doc_type="contract", counterparty="ООО Ромашка",
            reference="Д-15/2024", group_key=KEY, amount=float("nan"),
        ),
    ]


def _manifest(**kwargs: object) -> dict:
    return json.loads(build_manifest(JOB, _docs(), Usage(1_000_000, 100_000, 0, 0), **kwargs))  # type: ignore[arg-type]


def test_job_is_described_by_id_and_hash_with_its_name_as_metadata() -> None:
    job = _manifest()["job"]
    assert job == {
        "id": 12, "sha256": "ab" * 32, "source_name": "Счёт 2024.pdf", "kind": "pdf",
        "size_bytes": 123_456, "pages": 10, "mode": "batch",
    }


def test_documents_in_index_order_with_fields_and_keys() -> None:
    docs = _manifest()["documents"]
    assert [d["index"] for d in docs] == [0, 1]
    second = docs[1]
    assert (second["first_page"], second["last_page"], second["pages"]) == (3, 10, 8)
    assert second["type"] == "invoice" and second["fields"] == {"inn": "7701"}
    assert second["pdf_key"] == "jobs/12/documents/1.pdf" and second["group"] == KEY
    assert docs[0]["amount"] is None  # NaN is not JSON


def test_groups_list_their_documents() -> None:
    (group,) = _manifest()["groups"]
    assert group == {"key": KEY, "label": "ООО Ромашка · Д-15/2024", "documents": [0, 1]}


def test_usage_and_cost() -> None:
    manifest = _manifest()
    assert manifest["usage"] == {
        "input_tokens": 1_000_000,
        "output_tokens": 100_000,
        "cache_read_tokens": 0,
        "cache_creation_tokens": 0,
    }
    assert manifest["estimated_cost_usd"] == pytest.approx((3.0 + 1.5) / 2)  # batch: half price
    shares = [d["estimated_cost_usd"] for d in manifest["documents"]]
    assert shares == pytest.approx([2.25 * 2 / 10, 2.25 * 8 / 10])


def test_sync_jobs_pay_list_price() -> None:
    usage = Usage(input_tokens=2_000, output_tokens=500, cache_read_tokens=10_000, cache_creation_tokens=1000)
    assert estimate_cost_usd(usage, batch=False) == pytest.approx(
        (2_000 * 3 + 500 * 15 + 10_000 * 0.3 + 1_000 * 3.75) / 1e6
    )
    assert estimate_cost_usd(usage, batch=True, prices=TokenPrices(batch_discount=1.0)) == estimate_cost_usd(
        usage, batch=False
    )


def test_usage_of_many_chunks_adds_up() -> None:
    total = total_usage([Usage(1, 2, 3, 4), Usage(10, 20, 30, 40)])
    assert total == Usage(11, 22, 33, 44)
    assert json.loads(build_manifest(JOB, [], [Usage(1, 2, 3, 4), Usage(10, 20, 30, 40)]))["usage"][
        "output_tokens"
    ] == 22


def test_bytes_are_stable_and_keys_sorted() -> None:
    usage = Usage(10, 20)
    first = build_manifest(JOB, _docs(), usage, model="m", prompt_version="v1")
    assert build_manifest(JOB, list(reversed(_docs())), usage, model="m", prompt_version="v1") == first
    text = first.decode("utf-8")
    assert "Счёт" in text  # UTF-8, not escapes
    parsed = json.loads(text)
    assert list(parsed) == sorted(parsed)
    assert parsed["claude"] == {"model": "m", "prompt_version": "v1"}


def test_no_documents_is_a_valid_manifest() -> None:
    manifest = json.loads(build_manifest(JOB, [], Usage()))
    assert manifest["documents"] == [] and manifest["groups"] == [] and manifest["estimated_cost_usd"] == 0
