"""Your own document classes: types, fields and split rules from a YAML file, not from code.

``model`` declares the file, ``load`` reads and checks it, ``render`` makes the structured-output
schema and the system prompt, ``values`` checks an answer's values, ``columns`` the table's columns.
"""

from raybatch.classes.load import (
    ClassesFileError,
    canonical,
    classes_digest,
    default_classes,
    effective,
    load_classes,
    parse_classes,
)
from raybatch.classes.model import OTHER, ClassesFile, ClassSpec, FieldSpec, SplitMode

__all__ = [
    "OTHER",
    "ClassSpec",
    "ClassesFile",
    "ClassesFileError",
    "FieldSpec",
    "SplitMode",
    "canonical",
    "classes_digest",
    "default_classes",
    "effective",
    "load_classes",
    "parse_classes",
]
