"""Cost per 1,000 pages of the sample corpus, per PAGE_MODALITY, at batch and at sync prices (a script).

    python bench/cost.py [--bundles 6] [--seed 7] [--out DIR]

For each modality: ``estimate`` the corpus, then ``run`` it with the built-in emulator (asked for),
and read the cost the run reports (``status``: each request's tokens at the price of the mode it was
sent in). The runs share one database, so OCR reads each page once and each modality's requests
replace the previous one's (their processing keys differ). The sync figure prices the same tokens
as synchronous calls. Prints a table, then one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from raybatch.cost import cost_usd
from raybatch.estimate import estimate
from raybatch.pipeline import run
from raybatch.report import status_summary
from raybatch.samples import write_samples
from raybatch.settings import Modality, Settings, StateSettings, load_settings, model_prices
from raybatch.state import open_state


def measure(settings: Settings, source: str) -> dict[str, Any]:
    """Estimate, then run, one modality; the figures per 1,000 pages."""
    predicted = estimate(settings, source, dashboard=False)
    report = run(settings, source, dashboard=False)
    ids = [j.id for j in report.jobs]
    state = open_state(settings.section(StateSettings))
    prices = model_prices(settings)
    summary = status_summary(state, prices, ids)
    per = 1000 / summary["pages"]
    usages = state.request_totals(ids).usage_by_mode.values()
    sync = sum(cost_usd({"sync": usage}, prices) for usage in usages)
    return {
        "modality": settings.page_modality.value,
        "pages": summary["pages"],
        "requests": summary["requests"],
        "input_tokens_per_page": round(summary["input_tokens"] / summary["pages"], 1),
        "output_tokens_per_page": round(summary["output_tokens"] / summary["pages"], 1),
        "batch_usd_per_1000_pages": round(summary["estimated_cost_usd"] * per, 4),
        "sync_usd_per_1000_pages": round(sync * per, 4),
        "estimated_batch_usd": predicted["cost_batch_usd"],
        "measured_batch_usd": summary["estimated_cost_usd"],
        "estimated_input_tokens": predicted["input_tokens"],
        "measured_input_tokens": summary["input_tokens"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=int, default=6)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", help="folder for samples and state (default: a temporary one)")
    args = parser.parse_args(argv)
    home = Path(args.out or tempfile.mkdtemp(prefix="raybatch-cost-"))
    write_samples(home / "samples", bundles=args.bundles, seed=args.seed)
    rows = []
    for modality in (Modality.IMAGES, Modality.ADAPTIVE, Modality.TEXT):
        settings = load_settings(raybatch_home=str(home), page_modality=modality, raybatch_emulator=True)
        rows.append(measure(settings.model_copy(update={"ray_address": None}), str(home / "samples")))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print("| PAGE_MODALITY | input tokens / page | output tokens / page | batch $ / 1,000 pages "
          "| sync $ / 1,000 pages |\n| --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| `{r['modality']}` | {r['input_tokens_per_page']} | {r['output_tokens_per_page']} | "
            f"{r['batch_usd_per_1000_pages']:.2f} | {r['sync_usd_per_1000_pages']:.2f} |"
        )
    print(json.dumps({"rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
