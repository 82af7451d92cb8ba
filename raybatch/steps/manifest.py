"""Manifest: one job's outcome as ``manifest.json`` — its source, documents, groups, tokens and cost.

Pure: records in, bytes out. Keys are sorted and nothing depends on the clock, so writing the
manifest again for the same job writes the same bytes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from raybatch.models import DocumentRecord, JobRecord, Usage
from raybatch.steps.group import group_label

MANIFEST_VERSION = 1


@dataclass(frozen=True)
class TokenPrices:
    """US dollars per million tokens, at the synchronous (list) price."""

    input: float = 3.0
    output: float = 15.0
    cache_read: float = 0.30
    cache_creation: float = 3.75
    batch_discount: float = 0.5  # the Message Batches API bills half


DEFAULT_PRICES = TokenPrices()  # a Sonnet-class model; pass the model's own prices when they differ


def total_usage(usages: Usage | Iterable[Usage]) -> Usage:
    """One ``Usage`` for many (each chunk's request), or the one given."""
    if isinstance(usages, Usage):
        return usages
    items = list(usages)
    return Usage(
        input_tokens=sum(u.input_tokens for u in items),
        output_tokens=sum(u.output_tokens for u in items),
        cache_read_tokens=sum(u.cache_read_tokens for u in items),
        cache_creation_tokens=sum(u.cache_creation_tokens for u in items),
    )


def estimate_cost_usd(usage: Usage, *, batch: bool, prices: TokenPrices = DEFAULT_PRICES) -> float:
    """What the tokens cost, in dollars, rounded to a millionth."""
    cost = (
        usage.input_tokens * prices.input
        + usage.output_tokens * prices.output
        + usage.cache_read_tokens * prices.cache_read
        + usage.cache_creation_tokens * prices.cache_creation
    ) / 1_000_000
    return round(cost * (prices.batch_discount if batch else 1.0), 6)


def build_manifest(
    job: JobRecord,
    documents: Sequence[DocumentRecord],
    usage: Usage | Iterable[Usage],
    *,
    prices: TokenPrices = DEFAULT_PRICES,
    model: str | None = None,
    prompt_version: str | None = None,
) -> bytes:
    """``manifest.json`` of a job: UTF-8 JSON with sorted keys, documents in index order.

    The cost is estimated at batch or sync prices by the job's mode and shared among documents
    by their page counts.
    """
    totals = total_usage(usage)
    cost = estimate_cost_usd(totals, batch=job.mode == "batch", prices=prices)
    ordered = sorted(documents, key=lambda doc: doc.index)
    pages = sum(doc.last_page - doc.first_page + 1 for doc in ordered)
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "job": _job_entry(job),
        "claude": {"model": model, "prompt_version": prompt_version},
        "documents": [_document_entry(doc, cost, pages) for doc in ordered],
        "groups": _groups(ordered),
        "usage": _usage_entry(totals),
        "estimated_cost_usd": cost,
    }
    text = json.dumps(manifest, sort_keys=True, ensure_ascii=False, indent=2, allow_nan=False, default=str)
    return (text + "\n").encode("utf-8")


def _job_entry(job: JobRecord) -> dict[str, Any]:
    # The source's name is kept as metadata only; nothing is keyed by it.
    return {
        "id": job.id,
        "sha256": job.sha256,
        "source_name": job.source_name,
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
        "type": str(doc.doc_type),
        "title": doc.title,
        "date": doc.date,
        "number": doc.number,
        "counterparty": doc.counterparty,
        "amount": doc.amount if doc.amount is not None and math.isfinite(doc.amount) else None,
        "currency": doc.currency,
        "reference": doc.reference,
        "fields": dict(doc.fields),
        "group": doc.group_key,
        "pdf_key": doc.pdf_key,
        "thumb_key": doc.thumb_key,
        "extra": dict(doc.extra),
        "estimated_cost_usd": round(job_cost * pages / job_pages, 6) if job_pages else 0.0,
    }


def _groups(documents: Sequence[DocumentRecord]) -> list[dict[str, Any]]:
    members: dict[str, list[DocumentRecord]] = {}
    for doc in documents:
        if doc.group_key:
            members.setdefault(doc.group_key, []).append(doc)
    return [
        {
            "key": key,
            "label": group_label(docs[0].counterparty, docs[0].reference),
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
