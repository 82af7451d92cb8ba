"""Read a classes file: YAML (duplicate keys refused), then the model, then its meaning.

Every problem is one ``ClassesFileError`` line naming the file and the place in it:
``classes file my.yaml: class invoice, field number: type: Input should be 'string', ...``.
"""

from __future__ import annotations

import functools
import hashlib
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from raybatch.classes.model import ClassesFile, MeaningError, SplitMode, check_meaning
from raybatch.errors import ConfigError

DEFAULT_NAME = "default"
SHIPPED = ("default", "logistics")  # files the package ships, loadable by name


class ClassesFileError(ConfigError):
    """A classes file that cannot be used: unreadable, not YAML, or not a valid taxonomy."""


class _UniqueKeys(yaml.SafeLoader):
    """A YAML loader that refuses a key given twice (PyYAML keeps the last one silently)."""


def _mapping(loader: _UniqueKeys, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"{key!r} given twice (line {key_node.start_mark.line + 1})", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeys.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


@functools.cache  # the package's own files: read once a process (a writer wants it for every table)
def shipped_text(name: str = DEFAULT_NAME) -> str:
    """The text of a classes file the package ships (``default`` or ``logistics``)."""
    return resources.files("raybatch.classes").joinpath(f"{name}.yaml").read_text(encoding="utf-8")


def read_classes_text(path: str | Path) -> str:
    """The text of a classes file: a path, or the name of a shipped file."""
    if str(path) in SHIPPED:
        return shipped_text(str(path))
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ClassesFileError(f"classes file {path}: cannot be read ({type(exc).__name__})") from None


@functools.lru_cache(maxsize=16)
def parse_classes(text: str, name: str = "<text>") -> ClassesFile:
    """The classes file ``text`` (``name`` says where it came from, in errors)."""
    try:
        data = yaml.load(text, Loader=_UniqueKeys)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ClassesFileError(f"classes file {name}: {where}not valid YAML ({problem})") from None
    if not isinstance(data, dict):
        raise ClassesFileError(f"classes file {name}: not a mapping of languages, fields and classes")
    try:
        return check_meaning(ClassesFile.model_validate(data))
    except ValidationError as exc:
        error = exc.errors()[0]
        raise ClassesFileError(f"classes file {name}: {_place(error['loc'])}: {error['msg']}") from None
    except MeaningError as exc:
        raise ClassesFileError(f"classes file {name}: {', '.join(exc.place)}: {exc}") from None


def load_classes(path: str | Path | None = None) -> ClassesFile:
    """The classes file at ``path`` (a shipped one by name); the default file when None."""
    if path is None:
        return default_classes()
    return parse_classes(read_classes_text(path), Path(path).name)


def default_classes() -> ClassesFile:
    """The shipped default: today's six classes and seven fields."""
    return parse_classes(shipped_text(DEFAULT_NAME), "default.yaml")


def effective(classes: ClassesFile, split_mode: SplitMode | str | None) -> ClassesFile:
    """``classes`` with the split mode a setting (``SPLIT_MODE``) chose instead of the file's."""
    if split_mode is None or SplitMode(split_mode) is classes.split:
        return classes
    return classes.model_copy(update={"split": SplitMode(split_mode)})


def canonical(classes: ClassesFile) -> str:
    """The classes as canonical JSON: what the processing key and the record of a job hash."""
    return classes.model_dump_json(exclude_none=True)


def classes_digest(classes: ClassesFile) -> str:
    """sha256 of the canonical classes: a job records it, ``classes_files`` is keyed by it."""
    return hashlib.sha256(canonical(classes).encode()).hexdigest()


def _place(loc: tuple[int | str, ...]) -> str:
    """A pydantic location in the file's words: ``class invoice, field number: type``."""
    words: list[str] = []
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        if part in ("classes", "fields", "properties") and parts:
            kind = {"classes": "class", "fields": "field", "properties": "field"}[str(part)]
            words.append(f"{kind} {parts.pop(0)}")
        else:
            words.append(str(part))
    return ", ".join(words) or "<top>"
