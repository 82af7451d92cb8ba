"""Manifest: one job's outcome as ``manifest.json`` — its source, documents, groups, tokens, cost
and who answered (Claude, the emulator, or an answer reused).

Pure: records in, bytes out. Keys are sorted and nothing depends on the clock, so writing the
manifest again for the same job writes the same bytes. Its names are the SQL rows' and the Parquet
table's (``doc_type``, ``group_key``, ``index``); its JSON Schema ships as
``raybatch/schemas/manifest.v2.json`` (``manifest_schema``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from raybatch.classes import ClassesFile, classes_digest, default_classes
from raybatch.cost import ModelPrices, add_usage, cost_usd, usage_by_mode
from raybatch.models import ChunkRecord, DocumentRecord, JobRecord, ProcessingMode, Usage
from raybatch.steps.group import group_label, group_values

MANIFEST_VERSION = 2  # 2: the SQL names (doc_type, group_key), text_key, source_uri, classes_sha256


def manifest_schema() -> dict[str, Any]:
    """The JSON Schema of this manifest version (package data)."""
    schema = resources.files("raybatch.schemas").joinpath(f"manifest.v{MANIFEST_VERSION}.json")
    loaded: dict[str, Any] = json.loads(schema.read_text(encoding="utf-8"))
    return loaded


def build_manifest(
    job: JobRecord,
    documents: Sequence[DocumentRecord],
    chunks: Sequence[ChunkRecord],
    *,
    prices: ModelPrices,
    model: str | None = None,
    prompt_version: str | None = None,
    classes: ClassesFile | None = None,
    usage: Mapping[ProcessingMode, Usage] | None = None,
) -> bytes:
    """``manifest.json`` of a job: UTF-8 JSON on one line with sorted keys, documents in index order.

    The cost comes from the job's tokens (``usage``, by the mode each request was sent with; the
    writer gives the state's, which counts the answers a redo replaced; default: the chunks') at
    the price of that mode (``raybatch.cost.cost_usd``), shared among documents by their page
    counts. ``answered_by`` says how many requests Claude answered, how many the built-in emulator
    answered (``emulated`` is then true: the fields are stand-ins), and how many reused an answer
    already held.
    """
    classes = classes or default_classes()
    digest = classes_digest(classes)
    by_mode = dict(usage) if usage is not None else usage_by_mode(chunks)
    cost = cost_usd(by_mode, prices)
    ordered = sorted(documents, key=lambda doc: doc.index)
    pages = sum(doc.last_page - doc.first_page + 1 for doc in ordered)
    emulated = sum(1 for c in chunks if c.emulated)
    reused = sum(1 for c in chunks if c.reused_from)
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "job": _job_entry(job),
        "claude": {"model": model, "prompt_version": prompt_version, "classes_sha256": digest},
        "classes": {"sha256": digest, "split": str(classes.split)},
        "documents": [_document_entry(doc, cost, pages) for doc in ordered],
        "groups": _groups(ordered, classes.group_by),
        "usage": _usage_entry(add_usage(by_mode.values())),
        "usage_by_mode": {mode: _usage_entry(usage) for mode, usage in sorted(by_mode.items())},
        "estimated_cost_usd": cost,
        "emulated": emulated > 0,
        "answered_by": {
            "claude": len(chunks) - emulated - reused,
            "emulator": emulated,
            "reused": reused,
        },
    }
    # One line: an indent would take Python's own JSON encoder, four times as slow as its C one (about
    # 0.2 ms of a small job's write). ``jq . manifest.json`` shows it indented.
    text = json.dumps(manifest, sort_keys=True, ensure_ascii=False, allow_nan=False, default=str)
    return (text + "\n").encode("utf-8")


def _job_entry(job: JobRecord) -> dict[str, Any]:
    # The source's name is kept as metadata only; nothing is keyed by it.
    return {
        "id": job.id,
        "sha256": job.sha256,
        "source_name": job.source_name,
        "source_uri": job.source_uri,
        "kind": str(job.kind),
        "size_bytes": job.size_bytes,
        "pages": job.pages,
        "mode": job.mode,
    }


def _document_entry(doc: DocumentRecord, job_cost: float, job_pages: int) -> dict[str, Any]:
    pages = doc.last_page - doc.first_page + 1
    return {
        "index": doc.index,
        "first_page": doc.first_page,
        "last_page": doc.last_page,
        "pages": pages,
        "doc_type": str(doc.doc_type),
        # each declared field at the top too, as before classes files, where its name is free
        **{name: _finite(value) for name, value in doc.values.items() if name not in _ENTRY_KEYS},
        "values": {name: _finite(value) for name, value in doc.values.items()},
        "problems": [list(problem) for problem in doc.problems],
        "repaired": doc.repaired,
        "fields": dict(doc.fields),
        "group_key": doc.group_key,
        "pdf_key": doc.pdf_key,
        "thumb_key": doc.thumb_key,
        "text_key": doc.text_key,
        "extra": dict(doc.extra),
        **_review_entry(doc),
        "estimated_cost_usd": round(job_cost * pages / job_pages, 6) if job_pages else 0.0,
    }


def _review_entry(doc: DocumentRecord) -> dict[str, Any]:
    """The document's version, score and review state (raybatch.review)."""
    return {
        "version": doc.version,
        "confidence": _finite(doc.confidence),
        "review": doc.review,
        "review_reasons": list(doc.review_reasons),
        "field_confidence": dict(doc.field_confidence),
    }


_ENTRY_KEYS = frozenset(
    {"index", "first_page", "last_page", "pages", "doc_type", "values", "problems", "repaired", "fields",
     "group_key", "pdf_key", "thumb_key", "text_key", "extra", "estimated_cost_usd",
     "version", "confidence", "review", "review_reasons", "field_confidence"}
)  # fmt: skip


def _finite(value: object) -> object:
    """JSON has no NaN or infinity: such an amount is written as null."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _groups(documents: Sequence[DocumentRecord], group_by: Sequence[str]) -> list[dict[str, Any]]:
    members: dict[str, list[DocumentRecord]] = {}
    for doc in documents:
        if doc.group_key:
            members.setdefault(doc.group_key, []).append(doc)
    return [
        {
            "key": key,
            "label": group_label(*group_values(docs[0], group_by)),
            "documents": [doc.index for doc in docs],
        }
        for key, docs in sorted(members.items())
    ]


def _usage_entry(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_creation_tokens": usage.cache_creation_tokens,
    }
