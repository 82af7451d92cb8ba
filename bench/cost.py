"""Cost per 1,000 pages of the sample corpus, per PAGE_MODALITY, at batch and sync prices (a script).

    python bench/cost.py [--bundles 6] [--seed 7] [--ocr auto|none|...] [--db sqlite:///ocr-cache.db]

Every chunk of the corpus is prepared in this process (``ChunkPreparer``: render, text layer, OCR,
build request), once per modality, and sent to the built-in emulator as a Messages call through the
anthropic SDK: the usage it bills (input tokens by the documented counting rule, output tokens of
its rule-based answer) is priced by ``raybatch.cost.cost_usd`` at batch and at sync prices for the
default model. Each request is also counted with ``count_tokens`` and priced as ``estimate`` prices
it (expected output tokens), to show how close the estimate comes. No Ray: the figures do not move
with the load of the machine. ``--db`` keeps the OCR results between invocations. Prints a table,
then one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from measure import source_job

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.claude.sync_client import AnthropicMessageClient
from raybatch.cost import EXPECTED_OUTPUT_TOKENS_PER_PAGE, add_usage, cost_usd
from raybatch.models import ProcessingMode, Usage
from raybatch.ocr import InMemoryPageTextCache, open_ocr
from raybatch.ocr.cache import PageTextCache
from raybatch.samples import write_samples
from raybatch.settings import (
    ClaudeSettings,
    Modality,
    OcrEngineName,
    OcrSettings,
    PrepareSettings,
    StateSettings,
    model_prices,
)
from raybatch.state import open_state
from raybatch.steps.chunk import plan_chunks
from raybatch.work.prepare import ChunkPreparer


def measure(
    paths: list[Path],
    modality: Modality,
    claude: ClaudeSettings,
    ocr_settings: OcrSettings,
    cache: PageTextCache,
) -> dict[str, Any]:
    """Prepare and send every chunk under ``modality``; tokens and cost per 1,000 pages."""
    preparer = ChunkPreparer(
        PrepareSettings(page_modality=modality), claude, ocr_settings, open_ocr(ocr_settings), cache=cache
    )
    usages: list[Usage] = []
    counted = pages = 0
    with AnthropicMessageClient(claude) as client:
        for i, path in enumerate(paths, start=1):
            job, data = source_job(path, i)
            for plan in plan_chunks(job.pages or 0):
                request = preparer.prepare(job, plan, data).request
                counted += client.count_tokens(request)
                result = client.send_one(request)
                assert result.usage is not None, result.error_message
                usages.append(result.usage)
                pages += len(plan.pages)
    prices = model_prices(claude)
    usage = add_usage(usages)
    expected = Usage(input_tokens=counted, output_tokens=pages * EXPECTED_OUTPUT_TOKENS_PER_PAGE)
    per = 1000 / pages
    batch, sync = ProcessingMode.BATCH, ProcessingMode.SYNC
    return {
        "modality": modality.value,
        "pages": pages,
        "requests": len(usages),
        "input_tokens_per_page": round(usage.input_tokens / pages, 1),
        "output_tokens_per_page": round(usage.output_tokens / pages, 1),
        "batch_usd_per_1000_pages": round(cost_usd({batch: usage}, prices) * per, 4),
        "sync_usd_per_1000_pages": round(cost_usd({sync: usage}, prices) * per, 4),
        "estimate_batch_usd_per_1000_pages": round(cost_usd({batch: expected}, prices) * per, 4),
        "estimate_input_tokens_match": counted == usage.input_tokens,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--bundles", type=int, default=6)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ocr", default="auto", choices=[e.value for e in OcrEngineName])
    parser.add_argument("--db", help="a state database to keep OCR results in (default: memory)")
    args = parser.parse_args(argv)
    ocr_settings = OcrSettings(ocr_engine=OcrEngineName(args.ocr))
    cache: PageTextCache = (
        open_state(StateSettings(database_url=args.db)) if args.db else InMemoryPageTextCache()
    )
    with (
        tempfile.TemporaryDirectory(prefix="raybatch-cost-") as tmp,
        EmulatorServer(EmulatorConfig(processing_seconds=0)) as server,
    ):
        write_samples(Path(tmp), bundles=args.bundles, seed=args.seed)
        paths = sorted(Path(tmp).glob("*.pdf"))
        claude = ClaudeSettings.model_validate(
            {"anthropic_base_url": server.base_url, "anthropic_api_key": "bench", "raybatch_emulator": True}
        )
        rows = []
        for modality in Modality:
            rows.append(measure(paths, modality, claude, ocr_settings, cache))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(
        "| PAGE_MODALITY | input tokens / page | output tokens / page | batch $ / 1,000 pages "
        "| sync $ / 1,000 pages | estimate, batch $ / 1,000 pages |\n| --- | --- | --- | --- | --- | --- |"
    )
    for r in rows:
        print(
            f"| `{r['modality']}` | {r['input_tokens_per_page']} | {r['output_tokens_per_page']} | "
            f"{r['batch_usd_per_1000_pages']:.3f} | {r['sync_usd_per_1000_pages']:.3f} | "
            f"{r['estimate_batch_usd_per_1000_pages']:.3f} |"
        )
    print(json.dumps({"model": claude.claude_model, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
