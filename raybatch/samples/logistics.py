"""A small corpus for the shipped example taxonomy (``raybatch/classes/logistics.yaml``): digital
PDFs of shipment files and their ``truth.json``, deterministic.

Each document opens with its class's heading and prints its fields as ``Label: value`` lines;
continuation pages print neither. A bundle's documents never put two of the same class on either
side of a chunk border (8 pages), where the emulator's rules cannot see the next page.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pymupdf

from raybatch.classes import load_classes
from raybatch.ids import sha256_bytes

CLASSES = "logistics"
_HEADINGS = {
    "bill_of_lading": "BILL OF LADING",
    "packing_list": "PACKING LIST",
    "commercial_invoice": "COMMERCIAL INVOICE",
    "customs_declaration": "CUSTOMS DECLARATION",
}
# The plan: each bundle's documents as (class, pages); the 3rd bundle crosses a chunk border.
_PLAN = [
    [("bill_of_lading", 2), ("packing_list", 1), ("commercial_invoice", 2)],
    [("other", 1), ("customs_declaration", 1), ("bill_of_lading", 1), ("packing_list", 2)],
    [("commercial_invoice", 3), ("packing_list", 2), ("bill_of_lading", 4), ("customs_declaration", 2)],
]


def _values(kind: str, rng: random.Random, n: int) -> dict[str, Any]:
    common = {
        "shipper": rng.choice(["Nordic Timber AB", "Shenzhen Lights Co", "Andes Coffee SA"]),
        "consignee": rng.choice(["Harbor Imports Ltd", "Rhein Handel GmbH"]),
        "date": f"2026-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
        "shipment_ref": f"SR-{1000 + n}",
    }
    own: dict[str, dict[str, Any]] = {
        "bill_of_lading": {
            "bl_number": f"MSCU{700000 + n}",
            "vessel": rng.choice(["MSC Aurora", "Maersk Elba"]),
            "port_of_loading": rng.choice(["Gothenburg", "Yantian"]),
            "containers": 2,
            "container_numbers": [f"TGHU{300000 + n}", f"TGHU{300100 + n}"],
        },
        "packing_list": {
            "packages": rng.randint(3, 90),
            "gross_weight_kg": 1250.5 + n,
            "hazardous": n % 2 == 0,
        },
        "commercial_invoice": {
            "invoice_number": f"CI-{2026}-{n:03d}",
            "total": round(rng.uniform(1000, 90000), 2),
            "currency": rng.choice(["USD", "EUR"]),
            "incoterms": rng.choice(["FOB", "CIF"]),
            "line_items": None,
        },
        "customs_declaration": {
            "declaration_number": f"DE{n:05d}",
            "hs_code": "4407.10",
            "duty": 312.25 + n,
            "customs_status": rng.choice(["cleared", "held"]),
        },
    }
    return {**common, **own.get(kind, {})}


def _lines(kind: str, values: dict[str, Any]) -> list[str]:
    classes = load_classes(CLASSES)
    lines = [_HEADINGS.get(kind, "Memo to the file"), ""]
    for name, spec in classes.class_fields(kind).items():
        value = values.get(name)
        if value is None:
            continue
        label = spec.title or name.replace("_", " ").capitalize()
        shown = (
            ", ".join(value)
            if isinstance(value, list)
            else ("yes" if value is True else "no" if value is False else value)
        )
        lines.append(f"{label}: {shown}")
    return lines


def _page(doc: pymupdf.Document, lines: list[str]) -> None:
    page = doc.new_page(width=595, height=842)
    page.insert_text((60, 80), "\n".join(lines), fontsize=11, fontname="helv")


def write_logistics(out_dir: Path, seed: int = 3) -> dict[str, Any]:
    """Write the bundles and ``truth.json`` (documents with their ``fields``) into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rng, n, bundles = random.Random(seed), 0, []
    for b, plan in enumerate(_PLAN):
        pdf, documents, first = pymupdf.open(), [], 1
        for index, (kind, pages) in enumerate(plan):
            n += 1
            values = _values(kind, rng, n) if kind != "other" else {"date": None}
            _page(pdf, _lines(kind, values))
            for k in range(2, pages + 1):
                _page(pdf, [f"(continued, sheet {k})", "The goods are described on the first sheet."])
            fields = {name: values.get(name) for name in load_classes(CLASSES).class_fields(kind)}
            documents.append(
                {
                    "index": index,
                    "first_page": first,
                    "last_page": first + pages - 1,
                    "type": kind,
                    "fields": fields,
                }
            )
            first += pages
        data = pdf.tobytes()
        name = f"shipment_{b:03d}.pdf"
        (out_dir / name).write_bytes(data)
        bundles.append(
            {
                "file": name,
                "sha256": sha256_bytes(data),
                "pages": first - 1,
                "page_info": [],
                "documents": documents,
            }
        )
    truth = {"seed": seed, "classes": CLASSES, "bundles": bundles, "groups": []}
    (out_dir / "truth.json").write_text(json.dumps(truth, indent=1) + "\n", encoding="utf-8")
    return truth
