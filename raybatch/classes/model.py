"""The classes file as pydantic models: the document classes, their fields, and how to split.

Pydantic checks each value's shape; ``check_meaning`` then checks what ties values together (a
``required`` field that is declared, a ``group_by`` field that every class has...). Both report
through ``raybatch.classes.load``, one line naming the file, the class and the field.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

NAME = re.compile(r"^[a-z][a-z0-9_]*$")
OTHER = "other"  # the class every file has: anything that is none of the others
FieldType = Literal["string", "number", "integer", "boolean", "array", "object"]


class SplitMode(StrEnum):
    """How a file becomes documents: Claude finds them, one per page, or the whole file is one."""

    LLM = "llm"
    PAGE = "page"
    FILE = "file"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FieldSpec(_Strict):
    """One field, as a JSON Schema property: a type, and what helps Claude read it."""

    type: FieldType
    format: Literal["date"] | None = None
    enum: tuple[str, ...] | None = None
    title: str | None = Field(None, description="the label as printed on the page")
    description: str | None = None
    items: FieldSpec | None = None
    properties: dict[str, FieldSpec] | None = None


class ClassSpec(_Strict):
    """One document class: what it is, what opens it, its own fields and the ones it must have."""

    description: str = ""
    hints: tuple[str, ...] = ()
    fields: dict[str, FieldSpec] = Field(default_factory=dict)
    required: tuple[str, ...] = ()
    review_below: float | None = Field(None, ge=0.0, le=1.0, description="review a document below this")


class ClassesFile(_Strict):
    """A whole classes file."""

    languages: tuple[str, ...] = ("eng",)
    split: SplitMode = SplitMode.LLM
    fields: dict[str, FieldSpec] = Field(default_factory=dict)
    group_by: tuple[str, ...] = ()
    stitch_by: tuple[str, ...] | None = None  # None: the group_by fields
    classes: dict[str, ClassSpec]

    def class_fields(self, name: str) -> dict[str, FieldSpec]:
        """Every field a document of class ``name`` has: the common ones, then its own."""
        own = self.classes[name].fields if name in self.classes else {}
        return {**self.fields, **own}

    @property
    def boundary_fields(self) -> tuple[str, ...]:
        """Fields whose differing values mean two documents where the flags at a border disagree."""
        return self.group_by if self.stitch_by is None else self.stitch_by

    def column_name(self, class_name: str, field: str) -> str:
        """The table column of a class's own field: ``<class>_<field>`` (common fields: their name)."""
        return field if field in self.fields else f"{class_name}_{field}"


class MeaningError(ValueError):
    """A classes file whose values fit but do not agree; ``place`` says where (class, field)."""

    def __init__(self, place: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.place = place


def check_meaning(model: ClassesFile) -> ClassesFile:
    """``model`` with the class ``other`` added when missing; raises ``MeaningError``."""
    for place, field_spec in _all_fields(model):
        _check_field(place, field_spec)
    for name, class_spec in model.classes.items():
        _check_class(model, name, class_spec)
    for key in ("group_by", "stitch_by"):
        for field in getattr(model, key) or ():
            if field not in model.fields:
                raise MeaningError((key,), f"{field!r} is not one of the common fields")
    _check_columns(model)
    if OTHER in model.classes:
        return model
    other = {OTHER: ClassSpec.model_validate({"description": "Anything else."})}
    return model.model_copy(update={"classes": {**model.classes, **other}})


def _all_fields(model: ClassesFile) -> list[tuple[tuple[str, ...], FieldSpec]]:
    found: list[tuple[tuple[str, ...], FieldSpec]] = [
        (("field " + name,), s) for name, s in model.fields.items()
    ]
    for class_name, spec in model.classes.items():
        found += [((f"class {class_name}", f"field {name}"), f) for name, f in spec.fields.items()]
    return found


def _check_field(place: tuple[str, ...], spec: FieldSpec) -> None:
    name = place[-1].removeprefix("field ")
    if not NAME.match(name):
        raise MeaningError(place, "a field's name is snake_case (a-z, 0-9, _), starting with a letter")
    if spec.type == "array" and spec.items is None:
        raise MeaningError(place, "an array needs 'items'")
    if spec.type == "object" and not spec.properties:
        raise MeaningError(place, "an object needs 'properties'")
    if (spec.enum is not None or spec.format is not None) and spec.type != "string":
        raise MeaningError(place, "'enum' and 'format' go with type string")
    if spec.items is not None:
        _check_field((*place, "field items"), spec.items)
    for sub, sub_spec in (spec.properties or {}).items():
        _check_field((*place, f"field {sub}"), sub_spec)


def _check_class(model: ClassesFile, name: str, spec: ClassSpec) -> None:
    place = f"class {name}"
    if not NAME.match(name):
        raise MeaningError((place,), "a class's name is snake_case (a-z, 0-9, _), starting with a letter")
    for field in spec.fields:
        if field in model.fields:
            raise MeaningError((place, f"field {field}"), "already a common field")
    for field in spec.required:
        if field not in model.class_fields(name):
            raise MeaningError((place, f"field {field}"), "required but not declared")


def _check_columns(model: ClassesFile) -> None:
    seen = {name: "the common fields" for name in model.fields}
    for class_name, spec in model.classes.items():
        for field in spec.fields:
            column = model.column_name(class_name, field)
            if column in seen:
                place = (f"class {class_name}", f"field {field}")
                raise MeaningError(place, f"its column {column!r} clashes with one of {seen[column]}")
            seen[column] = f"class {class_name}"
