"""The benchmark scripts' pure parts on a one-page scan, so bench/ cannot rot unnoticed. No Ray."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anthropic
import pymupdf
import pytest

from raybatch.claude.emulator import EmulatorConfig, EmulatorServer
from raybatch.ocr import InMemoryPageTextCache
from raybatch.settings import Modality, OcrEngineName, OcrSettings

sys.path.append(str(Path(__file__).resolve().parents[1] / "bench"))  # last: never shadows a package

import measure
import run
import scans
import tokens
import urgent


@pytest.fixture(scope="module")
def one_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    (path,) = scans.write_scanned_bundles(tmp_path_factory.mktemp("scans"), 1, max_pages=1)
    return path


def test_scanned_bundle_is_one_image_only_page(one_page: Path) -> None:
    with pymupdf.open(one_page) as doc:
        assert doc.page_count == 1
        assert doc[0].get_text().strip() == ""
        assert doc[0].get_images()


def test_run_json_line_holds_every_required_key(one_page: Path, tmp_path: Path) -> None:
    settings = run.bench_settings(run.parse(["--quick"]), tmp_path)
    assert (settings.batch_max_mb, settings.ocr_engine, settings.ray_address) == (5, OcrEngineName.NONE, None)
    single = measure.single_process(settings, [one_page])
    assert single.pages == 1 and single.seconds > 0 and single.request_bytes > 0
    prepare = measure.Timing(pages=1, seconds=single.seconds / 1.5, request_bytes=single.request_bytes)
    e2e = measure.EndToEnd(
        seconds=4 * prepare.seconds,
        jobs=1,
        failed=0,
        batches=3,
        request_bytes=12_000_001,
        writer_peak_mb=300.0,
        writer_idle_mb=250.0,
        writer_report_peak_mb=300.0,
        sources_peak_mb=0.1,
    )
    lines: list[str] = []
    measure.report(measure.figures(settings, 2, single, prepare, e2e), say=lines.append)
    result = json.loads(lines[-1])
    assert set(measure.REQUIRED_KEYS) <= set(result)
    assert result["prepare_efficiency"] == pytest.approx(0.75, abs=0.002)
    assert result["e2e_over_prepare"] == pytest.approx(4.0, abs=0.01)
    assert result["batches_lower_bound"] == 3  # ⌈12 000 001 / 5 000 000⌉
    assert len(lines) > 1  # human-readable lines come first


def test_sources_peak_counts_overlapping_writes_only() -> None:
    intervals = [(0.0, 2.0, 5.0), (1.0, 3.0, 4.0), (2.0, 4.0, 6.0), (5.0, 6.0, 1.0)]
    assert measure.sources_peak_mb(intervals) == 10.0  # 5 + 4, then 4 + 6 (the first ended at 2.0)
    assert measure.sources_peak_mb([]) == 0.0


def test_tokens_per_modality_through_the_sdk(one_page: Path) -> None:
    cache, ocr_settings = InMemoryPageTextCache(), OcrSettings(ocr_engine=OcrEngineName.NONE)
    with EmulatorServer(EmulatorConfig()) as server:
        count = tokens.sdk_counter(anthropic.Anthropic(base_url=server.base_url, api_key="test"))
        overhead = tokens.request_overhead(count)
        rows = {
            m: tokens.measure([one_page], m, None, cache, count, ocr_settings).row(overhead) for m in Modality
        }
    lines: list[str] = []
    tokens.table(list(rows.values()), say=lines.append)
    assert len(lines) == 1 + len(Modality)
    images = rows[Modality.IMAGES]
    assert images["pages"] == 1 and images["images_per_page"] == 1.0
    # a scan without OCR has no text: every modality must still send its image
    assert rows[Modality.TEXT]["images_per_page"] == 1.0
    assert images["page_tokens_per_page"] > 1000  # an A4-sized image costs ~1 600 tokens


def test_urgent_json_line_compares_the_bundle_during_a_backlog_with_it_alone(tmp_path: Path) -> None:
    folder, bundle, warm = urgent.write_inputs(tmp_path, backlog=2, bundle_pages=3)
    assert len(list(folder.glob("*.pdf"))) == 2 and warm.exists()
    with pymupdf.open(bundle) as doc:
        assert doc.page_count == 3
    args = urgent.parse(["--quick"])
    seen = {
        "seconds": 3.0, "backlog_seconds": 20.0, "pending_at_arrival": 5, "written_first": True,
        "sync_only": True, "backlog_ok": True, "answered_twice": 0,
    }  # fmt: skip
    lines: list[str] = []
    urgent.report(urgent.figures(args, 30, 2.0, seen, {"answered": 1.0}), say=lines.append)
    result = json.loads(lines[-1])
    assert (result["ratio"], result["within_goal"], result["goal_ratio"]) == (1.5, True, 2.0)
    assert result["urgent_alone_s"] == 2.0 and result["urgent_during_backlog_s"] == 3.0
    assert result["alone_phases"] == {"answered": 1.0}
    assert len(lines) == 4
