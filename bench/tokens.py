"""Input tokens per page for each PAGE_MODALITY on the sample corpus (a script, not a test).

    python bench/tokens.py [--bundles 6] [--seed 7] [--ocr auto|none|tesseract|rapidocr]

Every chunk of the corpus goes through the prepare step (``ChunkPreparer``: render, text layer, OCR,
build request) once per modality — images / adaptive / text — and each request is counted by the
built-in emulator's ``POST /v1/messages/count_tokens`` through the anthropic SDK (text at four
characters a token, each image width x height / 750 tokens, at most 1 600). OCR runs once per page
(a shared cache). Prints a table, then one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
from measure import source_job

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.claude.prompt import SYSTEM_PROMPT
from raybatch.claude.schema import answer_schema
from raybatch.ocr import InMemoryPageTextCache, open_ocr
from raybatch.ocr.cache import PageTextCache
from raybatch.ocr.port import OcrEngine
from raybatch.samples import write_samples
from raybatch.settings import ClaudeSettings, Modality, OcrEngineName, OcrSettings, PrepareSettings
from raybatch.steps.chunk import plan_chunks
from raybatch.work.prepare import ChunkPreparer

Counter = Callable[[Mapping[str, Any]], int]


@dataclass
class ModalityTokens:
    """What one modality cost on the corpus."""

    modality: Modality
    pages: int = 0
    requests: int = 0
    images: int = 0
    input_tokens: int = 0
    request_bytes: int = 0

    def row(self, overhead: int) -> dict[str, Any]:
        """The figures per page; ``overhead`` is what one request costs before any page."""
        pages = max(self.pages, 1)
        return {
            "modality": self.modality.value,
            "pages": self.pages,
            "requests": self.requests,
            "images_per_page": round(self.images / pages, 3),
            "input_tokens": self.input_tokens,
            "input_tokens_per_page": round(self.input_tokens / pages, 1),
            "page_tokens_per_page": round((self.input_tokens - overhead * self.requests) / pages, 1),
            "request_kb_per_page": round(self.request_bytes / pages / 1000, 1),
        }


def measure(
    paths: Iterable[Path],
    modality: Modality,
    ocr: OcrEngine | None,
    cache: PageTextCache,
    count: Counter,
    ocr_settings: OcrSettings,
) -> ModalityTokens:
    """Prepare every chunk of ``paths`` under ``modality`` and count its request's input tokens."""
    preparer = ChunkPreparer(
        PrepareSettings(page_modality=modality), ClaudeSettings(), ocr_settings, ocr, cache=cache
    )
    totals = ModalityTokens(modality)
    for i, path in enumerate(paths, start=1):
        job, data = source_job(path, i)
        for plan in plan_chunks(job.pages or 0):
            request = preparer.prepare(job, plan, data).request
            totals.pages += len(plan.pages)
            totals.requests += 1
            params = request.params
            totals.images += sum(b.get("type") == "image" for b in params["messages"][0]["content"])
            totals.input_tokens += count(params)
            totals.request_bytes += request.encoded_size
    return totals


def sdk_counter(client: anthropic.Anthropic) -> Counter:
    """Counts a request's input tokens through ``client.messages.count_tokens``."""

    def count(params: Mapping[str, Any]) -> int:
        counted = client.messages.count_tokens(
            model=params["model"],
            system=params["system"],
            messages=params["messages"],
            output_config=params["output_config"],
        )
        return counted.input_tokens

    return count


def request_overhead(count: Counter) -> int:
    """Tokens of a request without pages: system prompt, output schema (one short user turn)."""
    params = {
        "model": ClaudeSettings().claude_model,
        "system": [{"type": "text", "text": SYSTEM_PROMPT}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "."}]}],
        "output_config": {"format": {"type": "json_schema", "schema": answer_schema()}},
    }
    return count(params)


COLUMNS = (  # (heading, key, format)
    ("modality", "modality", "<9"),
    ("pages", "pages", ">5"),
    ("images/page", "images_per_page", ">11.2f"),
    ("tokens/page", "input_tokens_per_page", ">11.1f"),
    ("pages only", "page_tokens_per_page", ">10.1f"),
    ("KB/page", "request_kb_per_page", ">8.1f"),
)


def table(rows: list[dict[str, Any]], say: Callable[[str], None] = print) -> None:
    """The figures as an aligned text table."""
    say(" ".join(f"{head:{fmt[0]}{fmt[1:].split('.')[0]}}" for head, _, fmt in COLUMNS))
    for row in rows:
        say(" ".join(f"{row[key]:{fmt}}" for _, key, fmt in COLUMNS))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--bundles", type=int, default=6)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ocr", default="auto", choices=[e.value for e in OcrEngineName])
    args = parser.parse_args(argv)
    ocr_settings = OcrSettings(ocr_engine=OcrEngineName(args.ocr))
    ocr, cache = open_ocr(ocr_settings), InMemoryPageTextCache()
    with (
        tempfile.TemporaryDirectory(prefix="raybatch-tokens-") as tmp,
        EmulatorServer(EmulatorConfig()) as server,
    ):
        write_samples(Path(tmp), bundles=args.bundles, seed=args.seed)
        paths = sorted(Path(tmp).glob("*.pdf"))
        count = sdk_counter(anthropic.Anthropic(base_url=server.base_url, api_key="bench"))
        overhead = request_overhead(count)
        rows = [measure(paths, m, ocr, cache, count, ocr_settings).row(overhead) for m in Modality]
    engine = getattr(ocr, "name", "none") if ocr is not None else "none"
    print(f"sample corpus: {args.bundles} bundles, seed {args.seed}; OCR engine: {engine}")
    print(f"request overhead (system prompt + output schema): {overhead} tokens per request of up to 8 pages")
    table(rows)
    print(json.dumps({"ocr_engine": engine, "request_overhead_tokens": overhead, "modalities": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
