"""Write the sample corpus: ``bundle_000.pdf ...`` and ``truth.json``, deterministically."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from raybatch.ids import sha256_bytes
from raybatch.samples.compose import print_date
from raybatch.samples.plan import CorpusPlan, PlannedBundle, plan_corpus
from raybatch.samples.render import render_bundle
from raybatch.samples.truth import Truth


def write_samples(out_dir: Path, bundles: int = 6, seed: int = 7) -> dict[str, Any]:
    """Write the bundles and ``truth.json`` into ``out_dir``; return the truth as a dict."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plan = plan_corpus(bundles, seed)
    entries = []
    for bundle in plan.bundles:
        data = render_bundle(bundle, seed)
        (out_dir / bundle.file).write_bytes(data)
        entries.append(bundle_truth(bundle, sha256_bytes(data)))
    truth = {"seed": seed, "bundles": entries, "groups": groups_truth(plan)}
    Truth.model_validate(truth)  # what we write is what load_truth reads
    (out_dir / "truth.json").write_text(
        json.dumps(truth, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    return truth


def bundle_truth(bundle: PlannedBundle, sha256: str) -> dict[str, Any]:
    """One bundle's entry in ``truth.json``."""
    pages = bundle.pages
    page_info = [
        {"page": n, "scanned": p.scanned, "rotation": p.rotation, "blank": p.blank, "size": p.size}
        for n, p in enumerate(pages, start=1)
    ]
    documents, first = [], 1
    for index, doc in enumerate(bundle.documents):
        spec = doc.spec
        fields = {
            "title": spec.title,
            "date": print_date(spec.date, "en"),
            "number": spec.number,
            "counterparty": spec.deal.counterparty,
            "amount": None if spec.amount_cents is None else spec.amount_cents / 100,
            "currency": spec.currency,
            "reference": spec.deal.reference,
        }
        documents.append(
            {
                "index": index,
                "first_page": first,
                "last_page": first + len(doc.pages) - 1,
                "type": spec.type.value,
                **fields,
                "fields": fields,  # the classes file's fields, as ``raybatch eval`` scores them
                "language": spec.language,
                "group": spec.deal.key,
            }
        )
        first += len(doc.pages)
    return {
        "file": bundle.file,
        "sha256": sha256,
        "pages": len(pages),
        "page_info": page_info,
        "documents": documents,
    }


def groups_truth(plan: CorpusPlan) -> list[dict[str, Any]]:
    """Every deal that has documents, with where its documents are."""
    groups = []
    for deal in plan.deals:
        members = [
            [bundle.file, index]
            for bundle in plan.bundles
            for index, doc in enumerate(bundle.documents)
            if doc.spec.deal is deal
        ]
        if members:
            groups.append(
                {
                    "key": deal.key,
                    "counterparty": deal.counterparty,
                    "reference": deal.reference,
                    "documents": members,
                }
            )
    return groups
