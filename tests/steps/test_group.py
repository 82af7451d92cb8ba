"""Group: the same deal under different spellings gets one key; different deals never share one."""

from __future__ import annotations

import re
from typing import Any

import pytest

from raybatch.models import DocumentRecord
from raybatch.steps.group import (
    GroupIdentity,
    assign_groups,
    edit_distance,
    group_documents,
    group_identity,
    group_key,
    group_label,
    normalize_counterparty,
    normalize_reference,
    same_group,
)

ROMASHKA = [
    "ООО «Ромашка»",
    'ооо "Ромашка"',
    "Ромашка, ООО",
    "OOO Ромашка",  # Latin O's
    "Pомашка",  # a Latin P
    "Общество с ограниченной ответственностью «РОМАШКА»",
    "  ООО   “Ромашка”  ",
    "ООО 'Ромашка'",
]
D15 = ["Д-15/2024", "д 15 / 2024", "№Д-15/2024", "Договор № Д-15/2024", "Д15-2024", "Д.15.2024"]


def _doc(index: int, counterparty: str | None, reference: str | None, job_id: int = 1) -> DocumentRecord:
    return DocumentRecord(
        job_id=job_id,
        index=index,
        first_page=index + 1,
        last_page=index + 1,
        doc_type="invoice",
        values={"counterparty": counterparty, "reference": reference},
    )


@pytest.mark.parametrize("name", ROMASHKA)
@pytest.mark.parametrize("reference", D15)
def test_spellings_of_one_deal_share_a_key(name: str, reference: str) -> None:
    assert group_key(name, reference) == group_key("ООО «Ромашка»", "Д-15/2024")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Northwind Logistics LLC", "NORTHWIND LOGISTICS, L.L.C."),
        ("Northwind Logistics LLC", "Northwind Logistics"),
        ("Granite Peak Construction Ltd", "Granite Peak Construction Limited"),
        ("Crescent Marine Supply Co.", "crescent marine supply"),
        ("ИП Соколова Марина Игоревна", "Индивидуальный предприниматель Соколова Марина Игоревна"),
        ("АО «Уральские Станки»", 'Акционерное общество "Уральские станки"'),
        ("Blue Harbor Foods Inc.", "BlueHarbor Foods Inc"),  # a lost space
    ],
)
def test_legal_forms_and_punctuation_do_not_matter(a: str, b: str) -> None:
    assert normalize_counterparty(a) == normalize_counterparty(b)
    assert group_key(a, "D-2024-185") == group_key(b, "Contract No. D-2024-185")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (("ООО «Ромашка»", "Д-15/2024"), ("ООО «Василёк»", "Д-15/2024")),
        (("ООО «Ромашка»", "Д-15/2024"), ("ООО «Ромашка»", "Д-16/2024")),
        (("ООО «Ромашка»", "Д-15/2024"), ("ООО «Ромашка»", "Д-15/2025")),
        (("Northwind Logistics LLC", "D-2024-185"), ("Northwind Shipping LLC", "D-2024-185")),
    ],
)
def test_different_deals_get_different_keys(a: tuple[str, str], b: tuple[str, str]) -> None:
    assert group_key(*a) != group_key(*b)


@pytest.mark.parametrize(
    ("counterparty", "reference"),
    [(None, "Д-15"), ("ООО «Ромашка»", None), ("", "Д-15"), ("ООО", "Д-15"), ("Ромашка", " № ")],
)
def test_no_group_without_both_halves(counterparty: str | None, reference: str | None) -> None:
    assert group_key(counterparty, reference) is None
    assert group_label(counterparty, reference) is None


def test_key_is_short_stable_and_labelled() -> None:
    key = group_key("ООО «Ромашка»", "Д-15/2024")
    assert key is not None and re.fullmatch(r"g_[0-9a-f]{16}", key)
    assert key == "g_" + __import__("hashlib").sha1("pomaшka\x1fд152024".encode()).hexdigest()[:16]
    assert group_label("ООО  «Ромашка» ", " Д-15/2024") == "ООО «Ромашка» · Д-15/2024"


def test_reference_fillers_only_lead() -> None:
    assert normalize_reference("Contract No. 15") == normalize_reference("15")
    assert normalize_reference("No") == "no"  # a reference that is only a filler word stays itself
    assert normalize_reference("15 contract") == "15contract"


def test_edit_distance() -> None:
    assert edit_distance("kitten", "sitting", limit=5) == 3
    assert edit_distance("abc", "abc", limit=0) == 0
    assert edit_distance("abcdef", "a", limit=2) == 3  # gives up past the limit


def test_same_group_forgives_a_lost_letter_but_not_another_reference() -> None:
    full = group_identity("ООО «Северный Ветер»", "D-2024-120")
    lost = group_identity("ООО «Северньй Ветр»", "D-2024-120")
    other_ref = group_identity("ООО «Северный Ветер»", "D-2024-121")
    stranger = group_identity("ООО «Южный Берег»", "D-2024-120")
    assert full and lost and other_ref and stranger
    assert full.key != lost.key
    assert same_group(full, lost)
    assert not same_group(full, other_ref)
    assert not same_group(full, stranger)


def test_group_documents_merges_near_spellings_into_the_most_common() -> None:
    docs = [
        _doc(0, "ООО «Северный Ветер»", "D-2024-120"),
        _doc(1, "ООО «Северный Втер»", "D-2024-120"),
        _doc(2, "ооо северный ветер", "d 2024 120"),
        _doc(3, "ООО «Южный Берег»", "D-2024-120"),
        _doc(4, None, "D-2024-120"),
    ]
    groups = group_documents(docs)
    assert sorted([d.index for d in members] for members in groups.values()) == [[0, 1, 2], [3]]
    assert group_key("ООО «Северный Ветер»", "D-2024-120") in groups


def test_known_groups_win() -> None:
    known = group_identity("ООО «Северный Ветерок»", "D-2024-120")
    assert known is not None
    docs = [_doc(0, "ООО «Северный Ветер»", "D-2024-120"), _doc(1, "ООО «Северный Ветер»", "D-2024-120")]
    assigned = assign_groups(docs, known=[known])
    assert [d.group_key for d in assigned] == [known.key, known.key]
    assert assigned[0].index == 0 and assigned[0].counterparty == docs[0].counterparty


def test_assign_groups_leaves_ungroupable_documents_without_key() -> None:
    docs = [_doc(0, None, None), _doc(1, "ООО «Ромашка»", "Д-15/2024")]
    assert [d.group_key for d in assign_groups(docs)] == [None, group_key("ООО «Ромашка»", "Д-15/2024")]


def test_group_identity_fields() -> None:
    identity = group_identity("ООО «Ромашка»", "Д-15/2024")
    assert identity == GroupIdentity(
        key=identity.key if identity else "",
        label="ООО «Ромашка» · Д-15/2024",
        counterparty="pomaшka",
        reference="д152024",
    )


def _sample_truth(bundles: int, seed: int) -> dict[str, Any]:
    samples = pytest.importorskip("raybatch.samples")
    write = pytest.importorskip("raybatch.samples.write")
    plan = samples.plan_corpus(bundles, seed)
    return {
        "bundles": [write.bundle_truth(bundle, "0" * 64) for bundle in plan.bundles],
        "groups": write.groups_truth(plan),
    }


def _truth_partition(truth: dict[str, Any]) -> set[frozenset[tuple[str, int]]]:
    return {frozenset((file, index) for file, index in group["documents"]) for group in truth["groups"]}


def _found_partition(truth: dict[str, Any], noise: Any = None) -> set[frozenset[tuple[str, int]]]:
    docs, where = [], []
    for b, bundle in enumerate(truth["bundles"]):
        for doc in bundle["documents"]:
            party, ref = doc["counterparty"], doc["reference"]
            if noise is not None:
                party, ref = noise(party, f"{bundle['file']}:{doc['index']}"), noise(ref, doc["index"])
            docs.append(_doc(doc["index"], party, ref, job_id=b))
            where.append((bundle["file"], doc["index"]))
    position = {id(doc): spot for doc, spot in zip(docs, where, strict=True)}
    return {frozenset(position[id(d)] for d in members) for members in group_documents(docs).values()}


@pytest.mark.parametrize("seed", [7, 11])
def test_sample_corpus_groups_come_back_from_counterparty_and_reference(seed: int) -> None:
    truth = _sample_truth(6, seed)
    assert len(truth["groups"]) > 1
    assert _found_partition(truth) == _truth_partition(truth)


@pytest.mark.parametrize("seed", [7, 11])
def test_sample_corpus_groups_survive_ocr_noise(seed: int) -> None:
    noise = pytest.importorskip("raybatch.samples.noise")
    truth = _sample_truth(6, seed)
    noisy = {
        noise.add_ocr_noise(doc["counterparty"], f"{bundle['file']}:{doc['index']}")
        for bundle in truth["bundles"]
        for doc in bundle["documents"]
    }
    assert len(noisy) > len(truth["groups"])  # the noise really changed some spellings
    assert _found_partition(truth, noise.add_ocr_noise) == _truth_partition(truth)


@pytest.mark.parametrize("spelling", ["No15/2024", "no 15/2024", "№15/2024", "No. 15/2024", "#15/2024"])
def test_number_marks_are_one_rule(spelling: str) -> None:
    assert normalize_reference(spelling) == normalize_reference("15/2024") == "152024"


def test_a_glued_no_inside_a_number_stays() -> None:
    assert normalize_reference("Д-15 no5") == "д15no5"
