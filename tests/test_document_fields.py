"""A document's fields are declared once (``raybatch.models.DocumentFields``) and every place follows."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

from raybatch.claude.answer import ChunkAnswer, DocType, FoundDocument, PageRotation
from raybatch.claude.schema import answer_schema
from raybatch.cost import ModelPrices
from raybatch.models import DOCUMENT_FIELDS, DocumentRecord, JobRecord, JobStatus, SourceKind
from raybatch.state import schema
from raybatch.state.rows import DOCUMENT_COLUMNS, document_values
from raybatch.steps.manifest import build_manifest
from raybatch.steps.stitch import stitch
from raybatch.steps.table import SCHEMA

NAMES = [spec.name for spec in DOCUMENT_FIELDS]
VALUES: dict[str, Any] = {spec.name: 1.5 if spec.kind is float else spec.name for spec in DOCUMENT_FIELDS}
JSON_TYPES = {str: "string", float: "number"}

# Each place's view of the declared fields of one document, printed as JSON: run in a fresh
# interpreter so the places can be imported after the declaration was narrowed.
PLACES = """
import json
from raybatch.claude.answer import ChunkAnswer
from raybatch.claude.schema import answer_schema
from raybatch.cost import ModelPrices
from raybatch.models import DOCUMENT_FIELDS, DocumentRecord, JobRecord, JobStatus, SourceKind
from raybatch.state import schema
from raybatch.steps.manifest import build_manifest
from raybatch.steps.stitch import stitch
from raybatch.steps.table import SCHEMA

values = {spec.name: 1.5 if spec.kind is float else "x" for spec in DOCUMENT_FIELDS}
found = {"first_page": 1, "last_page": 1, "type": "act", "fields": [], **values}
answer = {"first_continues_previous": False, "last_continues_next": False,
          "documents": [found], "pages": [{"page": 1, "rotation": 0}]}
job = JobRecord(1, "ab" * 32, "file:///a.pdf", "a.pdf", SourceKind.PDF, 1, JobStatus.WRITING)
record = DocumentRecord(1, 0, 1, 1, "act", **values)
manifest = json.loads(build_manifest(job, [record], [], prices=ModelPrices(1, 1, 1, 1, 0.5)))
(stitched,) = stitch([(0, ChunkAnswer.model_validate(answer))], 1)
print(json.dumps({
    "answer": sorted(answer_schema()["$defs"]["FoundDocument"]["properties"]),
    "state table": [column.name for column in schema.documents.columns],
    "parquet": SCHEMA.names,
    "manifest": sorted(manifest["documents"][0]),
    "stitched": sorted(name for name in values if getattr(stitched, name) is not None),
}))
"""


def _places(prelude: str = "") -> dict[str, list[str]]:
    code = textwrap.dedent(prelude) + PLACES
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_every_declared_field_is_in_the_answer_schema_as_declared() -> None:
    document = answer_schema()["$defs"]["FoundDocument"]
    for spec in DOCUMENT_FIELDS:
        assert spec.name in document["required"]
        prop = document["properties"][spec.name]
        assert prop["description"] == spec.description
        assert prop["anyOf"] == [{"type": JSON_TYPES[spec.kind]}, {"type": "null"}]


def test_every_declared_field_is_a_column_and_a_row_value() -> None:
    columns = schema.documents.columns
    for spec in DOCUMENT_FIELDS:
        assert columns[spec.name].nullable
        assert getattr(columns[spec.name].type, "length", None) == spec.length
        assert spec.name in SCHEMA.names
    record = DocumentRecord(1, 0, 1, 1, "act", **VALUES)
    assert {name: document_values(record)[name] for name in NAMES} == VALUES
    assert set(NAMES) <= set(DOCUMENT_COLUMNS)


def test_every_declared_field_goes_through_stitch_and_manifest() -> None:
    found = FoundDocument(first_page=1, last_page=1, type=DocType.ACT, fields=[], **VALUES)
    answer = ChunkAnswer(
        first_continues_previous=False,
        last_continues_next=False,
        documents=[found],
        pages=[PageRotation(page=1, rotation=0)],
    )
    (stitched,) = stitch([(0, answer)], 1)
    assert {name: getattr(stitched, name) for name in NAMES} == VALUES
    job = JobRecord(1, "ab" * 32, "file:///a.pdf", "a.pdf", SourceKind.PDF, 1, JobStatus.WRITING)
    record = DocumentRecord(1, 0, 1, 1, "act", **VALUES)
    manifest = json.loads(build_manifest(job, [record], [], prices=ModelPrices(1, 1, 1, 1, 0.5)))
    assert {name: manifest["documents"][0][name] for name in NAMES} == VALUES


def test_a_field_left_out_of_the_declaration_leaves_every_place() -> None:
    everywhere = _places()
    narrowed = _places(
        """
        from raybatch import models
        models.DOCUMENT_FIELDS = tuple(spec for spec in models.DOCUMENT_FIELDS if spec.name != "reference")
        """
    )
    for place, names in everywhere.items():
        assert "reference" in names, place
        assert [name for name in names if name != "reference"] == narrowed[place], place
