"""``raybatch eval`` per class and per field: values compared after normalising by type."""

from __future__ import annotations

from raybatch.evaluate import evaluate
from raybatch.evaluate_fields import normalized
from raybatch.models import DocumentRecord
from raybatch.samples import write_samples

TRUTH = {
    "bundles": [
        {
            "file": "a.pdf",
            "pages": 4,
            "documents": [
                {
                    "first_page": 1,
                    "last_page": 2,
                    "type": "invoice",
                    "fields": {"total": 12.5, "party": "ACME  Ltd"},
                },
                {
                    "first_page": 3,
                    "last_page": 4,
                    "type": "letter",
                    "fields": {"date": "2024-03-01", "party": "Bob"},
                },
            ],
        }
    ]
}


def test_fields_are_scored_after_normalising_by_type() -> None:
    found = {
        "a.pdf": [
            DocumentRecord(1, 0, 1, 2, "invoice", values={"total": 12.501, "party": "acme ltd"}),
            DocumentRecord(1, 1, 3, 4, "letter", values={"date": "2024-03-01", "party": "Alice"}),
        ]
    }
    scores = evaluate(TRUTH, found)
    assert scores["field_accuracy"] == 0.75 and scores["fields_checked"] == 4
    assert scores["by_field"]["party"] == {"accuracy": 0.5, "checked": 2}
    assert scores["by_field"]["total"]["accuracy"] == 1.0


def test_boundaries_and_types_are_scored_per_class() -> None:
    found = {"a.pdf": [DocumentRecord(1, 0, 1, 2, "invoice"), DocumentRecord(1, 1, 3, 4, "invoice")]}
    by_class = evaluate(TRUTH, found)["by_class"]
    assert by_class["letter"]["boundary_recall"] == 1.0 and by_class["letter"]["type_accuracy"] == 0.0
    assert by_class["invoice"]["boundary_precision"] == 1.0 and by_class["invoice"]["type_accuracy"] == 1.0


def test_normalising() -> None:
    assert normalized(" Nordic  TIMBER ab ") == normalized("nordic timber AB")
    assert normalized(1250.5) == normalized("1,250.50") == normalized(1250.499)
    assert normalized("2024-03-01") == "2024-03-01" and normalized([]) is None


def test_the_sample_corpus_truth_carries_fields(tmp_path) -> None:  # type: ignore[no-untyped-def]
    truth = write_samples(tmp_path, bundles=1, seed=7)
    doc = truth["bundles"][0]["documents"][0]
    assert set(doc["fields"]) == {
        "title",
        "date",
        "number",
        "counterparty",
        "amount",
        "currency",
        "reference",
    }
    assert doc["fields"]["number"] == doc["number"]
