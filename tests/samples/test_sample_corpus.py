"""The sample corpus opens in PyMuPDF and is exactly what its truth.json says."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pymupdf
import pytest
from PIL import Image

from raybatch.claude.answer import DocType
from raybatch.ids import sha256_file
from raybatch.samples import CorpusPlan, Truth, TruthBundle, group_key, write_samples
from raybatch.samples.compose import PAGE_SIZES
from raybatch.samples.plan import REQUIRED_TURNS

# The direction PyMuPDF reports for text on a page that needs ``rotation``° clockwise to read upright.
DIRECTION = {0: (1, 0), 90: (0, -1), 180: (-1, 0), 270: (0, 1)}


def open_bundle(corpus_dir: Path, bundle: TruthBundle) -> pymupdf.Document:
    return pymupdf.open(corpus_dir / bundle.file)


def test_every_bundle_opens_and_matches_its_size_and_hash(corpus_dir: Path, truth: Truth) -> None:
    assert sorted(p.name for p in corpus_dir.iterdir()) == sorted(
        [b.file for b in truth.bundles] + ["truth.json"]
    )
    for bundle in truth.bundles:
        with open_bundle(corpus_dir, bundle) as doc:
            assert doc.page_count == bundle.pages == len(bundle.page_info)
            assert doc.metadata["creationDate"] == doc.metadata["modDate"] == "D:20240101000000Z"
        assert sha256_file(corpus_dir / bundle.file) == bundle.sha256
        assert [p.page for p in bundle.page_info] == list(range(1, bundle.pages + 1))
        assert 20 <= bundle.pages <= 40


def test_scanned_pages_are_images_only_and_digital_pages_carry_text(corpus_dir: Path, truth: Truth) -> None:
    for bundle in truth.bundles:
        with open_bundle(corpus_dir, bundle) as doc:
            for info in bundle.page_info:
                page = doc[info.page - 1]
                images, text = page.get_images(), page.get_text().strip()
                if info.scanned:
                    assert len(images) == 1 and text == "", (bundle.file, info)
                else:
                    assert images == [] and bool(text) is not info.blank, (bundle.file, info)


def test_digital_text_layer_is_the_planned_text(corpus_dir: Path, truth: Truth, plan: CorpusPlan) -> None:
    for bundle, planned in zip(truth.bundles, plan.bundles, strict=True):
        with open_bundle(corpus_dir, bundle) as doc:
            for info, page in zip(bundle.page_info, planned.pages, strict=True):
                if not info.scanned and not info.blank:
                    assert doc[info.page - 1].get_text() == page.text + "\n"


def test_rotated_digital_pages_have_text_running_sideways(corpus_dir: Path, truth: Truth) -> None:
    seen = Counter()
    for bundle in truth.bundles:
        with open_bundle(corpus_dir, bundle) as doc:
            for info in bundle.page_info:
                if info.scanned or info.blank:
                    continue
                lines = [
                    line for block in doc[info.page - 1].get_text("dict")["blocks"] for line in block["lines"]
                ]
                directions = {(round(line["dir"][0]), round(line["dir"][1])) for line in lines}
                assert directions == {DIRECTION[info.rotation]}, (bundle.file, info)
                seen[info.rotation] += 1
    assert set(seen) == {0, 90, 180, 270}


def _upright_scan(doc: pymupdf.Document, page_number: int, rotation: int) -> np.ndarray:
    data = doc.extract_image(doc[page_number - 1].get_images()[0][0])["image"]
    image = Image.open(io.BytesIO(data)).convert("L").rotate(-rotation, expand=True)  # clockwise
    return 255 - np.asarray(image, dtype=np.float32)  # ink is bright


def test_scans_read_upright_once_turned_by_their_rotation(corpus_dir: Path, truth: Truth) -> None:
    """Text starts at the left margin and the top of the page: once turned, ink sits left and high."""
    checked = 0
    for bundle in truth.bundles:
        with open_bundle(corpus_dir, bundle) as doc:
            for info in bundle.page_info:
                if not info.scanned or info.blank:
                    continue
                ink = _upright_scan(doc, info.page, info.rotation)
                rows, cols = ink.shape
                assert ink[:, : cols // 2].sum() > ink[:, cols // 2 :].sum(), (bundle.file, info)
                assert ink[: rows // 2].sum() > ink[rows // 2 :].sum(), (bundle.file, info)
                checked += 1
    assert checked > 20


def test_page_sizes_match_the_truth(corpus_dir: Path, truth: Truth) -> None:
    for bundle in truth.bundles:
        with open_bundle(corpus_dir, bundle) as doc:
            for info in bundle.page_info:
                page = doc[info.page - 1]
                width, height = PAGE_SIZES[info.size]
                if info.rotation in (90, 270):
                    width, height = height, width
                assert page.rotation == 0  # turned by drawing, never by /Rotate
                assert page.rect.width == pytest.approx(width) and page.rect.height == pytest.approx(height)
    sizes = {info.size for bundle in truth.bundles for info in bundle.page_info}
    assert sizes == {"A4", "Letter", "A5", "A4-landscape"}


def test_blank_pages_are_empty_and_inside_a_document(corpus_dir: Path, truth: Truth) -> None:
    blanks = 0
    for bundle in truth.bundles:
        firsts = {d.first_page for d in bundle.documents}
        with open_bundle(corpus_dir, bundle) as doc:
            for info in (i for i in bundle.page_info if i.blank):
                page = doc[info.page - 1]
                assert page.get_text() == "" and info.page not in firsts and info.rotation == 0
                if not info.scanned:
                    assert page.get_images() == [] and page.get_drawings() == []
                blanks += 1
    assert blanks >= 1


def test_documents_tile_each_bundle(truth: Truth) -> None:
    for bundle in truth.bundles:
        expected_first = 1
        for index, doc in enumerate(bundle.documents):
            assert doc.index == index and doc.first_page == expected_first
            assert 1 <= doc.last_page - doc.first_page + 1 <= 15
            assert (doc.amount is None) is (doc.currency is None) is (doc.type == DocType.LETTER)
            expected_first = doc.last_page + 1
        assert expected_first == bundle.pages + 1
    docs = [d for b in truth.bundles for d in b.documents]
    assert {d.type for d in docs} == set(DocType) - {DocType.OTHER}
    assert {d.language for d in docs} == {"en", "ru"}


def test_the_corpus_holds_every_hard_case(truth: Truth) -> None:
    pages = [(b, i) for b in truth.bundles for i in b.page_info]
    docs = [(b, d) for b in truth.bundles for d in b.documents]
    turns = {(i.scanned, i.rotation) for _, i in pages}
    assert set(REQUIRED_TURNS) <= turns
    crossing = [d for _, d in docs if d.first_page <= 8 < d.last_page]
    assert len(crossing) >= len(truth.bundles) // 2
    assert any(d.first_page == 9 for _, d in docs)  # a document starting right on a chunk border
    assert any(d.first_page <= 8 and d.last_page >= 17 for _, d in docs)  # one spanning three chunks
    assert any(i.blank and i.page in (9, 17) for _, i in pages)  # a blank page opening a chunk
    info = {(b.file, i.page): i for b, i in pages}
    scanned_starts = [d for b, d in docs if info[(b.file, d.first_page)].scanned]
    assert {d.language for d in scanned_starts} == {"en", "ru"}


def test_groups_tie_documents_across_bundles(truth: Truth) -> None:
    where = {(b.file, d.index): d for b in truth.bundles for d in b.documents}
    members = [tuple(m) for g in truth.groups for m in g.documents]
    assert sorted(members) == sorted(where)  # every document in exactly one group
    for group in truth.groups:
        assert group.key == group_key(group.counterparty, group.reference)
        for file, index in group.documents:
            doc = where[(file, index)]
            assert (doc.group, doc.counterparty, doc.reference) == (
                group.key,
                group.counterparty,
                group.reference,
            )
    spanning = [g for g in truth.groups if len({file for file, _ in g.documents}) > 1]
    assert len(spanning) >= len(truth.groups) // 2
    contracts = {d.reference: d for d in where.values() if d.type == DocType.CONTRACT}
    assert all(g.reference in contracts for g in truth.groups)
    assert all(contracts[g.reference].number == g.reference for g in truth.groups)


def test_same_seed_writes_the_same_bytes(tmp_path: Path, corpus_dir: Path) -> None:
    again = write_samples(tmp_path, bundles=6, seed=7)
    for name in sorted(p.name for p in corpus_dir.iterdir()):
        assert (tmp_path / name).read_bytes() == (corpus_dir / name).read_bytes(), name
    assert again == json.loads((corpus_dir / "truth.json").read_text(encoding="utf-8"))


def test_another_seed_writes_another_corpus(tmp_path: Path, truth: Truth) -> None:
    other = write_samples(tmp_path, bundles=2, seed=8)
    assert other["seed"] == 8 and len(other["bundles"]) == 2
    assert other["bundles"][0]["sha256"] != truth.bundles[0].sha256


def test_bundles_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_samples(tmp_path, bundles=0)
