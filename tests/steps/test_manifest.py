"""Manifest: sorted, stable JSON with the job, its documents, groups, tokens and cost."""

from __future__ import annotations

import json

import jsonschema
import pytest

from raybatch.classes import classes_digest, default_classes
from raybatch.cost import ModelPrices
from raybatch.models import ChunkRecord, ChunkStatus, DocumentRecord, JobRecord, JobStatus, SourceKind, Usage
from raybatch.steps.group import group_key
from raybatch.steps.manifest import MANIFEST_VERSION, build_manifest, manifest_schema

PRICES = ModelPrices(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30, batch_discount=0.5)

JOB = JobRecord(
    id=12,
    sha256="ab" * 32,
    source_uri="s3://in/scans/Счёт 2024.pdf",
    source_name="Счёт 2024.pdf",
    kind=SourceKind.PDF,
    size_bytes=123_456,
    status=JobStatus.WRITING,
    mode="batch",
    pages=10,
)
KEY = group_key("ООО «Ромашка»", "Д-15/2024")


def _docs() -> list[DocumentRecord]:
    return [
        DocumentRecord(
            job_id=12,
            index=1,
            first_page=3,
            last_page=10,
            doc_type="invoice",
            fields={"inn": "7701"},
            group_key=KEY,
            pdf_key="jobs/12/documents/1.pdf",
            thumb_key="jobs/12/documents/1.webp",
            values={
                "title": "Счёт № 7",
                "date": "2024-03-01",
                "number": "7",
                "counterparty": "ООО «Ромашка»",
                "amount": 1500.5,
                "currency": "RUB",
                "reference": "Д-15/2024",
            },
            text_key="jobs/12/documents/1.txt",
        ),
        DocumentRecord(
            job_id=12,
            index=0,
            first_page=1,
            last_page=2,
            doc_type="contract",
            group_key=KEY,
            values={"counterparty": "ООО Ромашка", "reference": "Д-15/2024", "amount": float("nan")},
        ),
    ]


def _chunk(n: int, usage: Usage, mode: str | None = "batch", **fields: object) -> ChunkRecord:
    tokens = {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_creation_tokens": usage.cache_creation_tokens,
    }
    return ChunkRecord(
        job_id=12,
        n=n,
        first_page=1,
        last_page=8,
        custom_id=f"job_12_batch_{n}",
        processing_key="k",
        status=ChunkStatus.SUCCEEDED,
        sent_mode=mode,
        **tokens,
        **fields,  # type: ignore[arg-type]
    )


def _manifest(chunks: list[ChunkRecord] | None = None, **kwargs: object) -> dict:
    chunks = chunks if chunks is not None else [_chunk(0, Usage(1_000_000, 100_000, 0, 0))]
    return json.loads(build_manifest(JOB, _docs(), chunks, prices=PRICES, **kwargs))  # type: ignore[arg-type]


def test_job_is_described_by_id_and_hash_with_its_name_as_metadata() -> None:
    job = _manifest()["job"]
    assert job == {
        "id": 12,
        "sha256": "ab" * 32,
        "source_name": "Счёт 2024.pdf",
        "source_uri": "s3://in/scans/Счёт 2024.pdf",
        "kind": "pdf",
        "size_bytes": 123_456,
        "pages": 10,
        "mode": "batch",
    }


def test_documents_in_index_order_with_fields_and_keys() -> None:
    docs = _manifest()["documents"]
    assert [d["index"] for d in docs] == [0, 1]
    second = docs[1]
    assert (second["first_page"], second["last_page"], second["pages"]) == (3, 10, 8)
    assert second["doc_type"] == "invoice" and second["fields"] == {"inn": "7701"}
    assert second["pdf_key"] == "jobs/12/documents/1.pdf" and second["group_key"] == KEY
    assert second["text_key"] == "jobs/12/documents/1.txt"
    assert docs[0]["amount"] is None  # NaN is not JSON


def test_the_names_are_the_sql_rows_names() -> None:
    (second,) = [d for d in _manifest()["documents"] if d["index"] == 1]
    row = DocumentRecord.__dataclass_fields__
    shared = {"index", "first_page", "last_page", "doc_type", "fields", "group_key", "pdf_key", "thumb_key"}
    assert shared <= set(second) and shared <= set(row)
    assert not {"type", "group", "doc_index"} & set(second)


def test_the_manifest_matches_its_published_schema() -> None:
    schema = manifest_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    manifest = _manifest(model="claude-x", prompt_version="p1")
    assert (
        manifest["manifest_version"] == MANIFEST_VERSION == schema["properties"]["manifest_version"]["const"]
    )
    jsonschema.validate(manifest, schema)
    renamed = json.loads(json.dumps(manifest).replace('"doc_type"', '"type"'))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(renamed, schema)  # the old name is refused


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


def test_each_chunk_pays_the_price_of_the_mode_it_was_sent_with() -> None:
    usage = Usage(input_tokens=2_000, output_tokens=500, cache_read_tokens=10_000, cache_creation_tokens=1000)
    listed = (2_000 * 3 + 500 * 15 + 10_000 * 0.3 + 1_000 * 3.75) / 1e6
    assert _manifest([_chunk(0, usage, "sync")])["estimated_cost_usd"] == pytest.approx(listed)
    mixed = _manifest([_chunk(0, usage, "sync"), _chunk(1, usage, "batch")])
    assert mixed["estimated_cost_usd"] == pytest.approx(listed * 1.5)
    assert mixed["usage_by_mode"]["sync"]["input_tokens"] == 2_000


def test_usage_of_many_chunks_adds_up() -> None:
    manifest = _manifest([_chunk(0, Usage(1, 2, 3, 4)), _chunk(1, Usage(10, 20, 30, 40))])
    assert manifest["usage"] == {
        "input_tokens": 11,
        "output_tokens": 22,
        "cache_read_tokens": 33,
        "cache_creation_tokens": 44,
    }


def test_who_answered_is_told_and_emulated_answers_are_marked() -> None:
    chunks = [
        _chunk(0, Usage(10, 2), emulated=True),
        _chunk(1, Usage(), None, reused_from="job_3_batch_1"),
        _chunk(2, Usage(10, 2)),
    ]
    manifest = _manifest(chunks)
    assert manifest["answered_by"] == {"claude": 1, "emulator": 1, "reused": 1}
    assert manifest["emulated"] is True
    assert _manifest()["emulated"] is False


def test_bytes_are_stable_and_keys_sorted() -> None:
    chunks = [_chunk(0, Usage(10, 20))]
    first = build_manifest(JOB, _docs(), chunks, prices=PRICES, model="m", prompt_version="v1")
    again = build_manifest(
        JOB, list(reversed(_docs())), chunks, prices=PRICES, model="m", prompt_version="v1"
    )
    assert again == first
    text = first.decode("utf-8")
    assert "Счёт" in text  # UTF-8, not escapes
    assert text.count("\n") == 1 and text.endswith("}\n")  # one line: C's encoder, not Python's indent
    parsed = json.loads(text)
    assert list(parsed) == sorted(parsed)
    digest = classes_digest(default_classes())
    assert parsed["claude"] == {"model": "m", "prompt_version": "v1", "classes_sha256": digest}
    assert parsed["classes"]["sha256"] == digest


def test_no_documents_is_a_valid_manifest() -> None:
    manifest = json.loads(build_manifest(JOB, [], [], prices=PRICES))
    assert manifest["documents"] == [] and manifest["groups"] == [] and manifest["estimated_cost_usd"] == 0
