"""Keeping a run's local state and outputs out of job uploads.

``ray job submit --working-dir .`` uploads the working directory without what its ``.rayignore``
lists. A run whose local store folder or SQLite file lies inside the working directory adds them to
that ``.rayignore`` when it starts (a directory without one is not set up for job uploads and is
left alone), so a later submission never uploads documents, page text or the database.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from sqlalchemy.engine import make_url

from raybatch.settings import Settings

log = logging.getLogger(__name__)

IGNORE_FILE = ".rayignore"
HEADER = "# Local state and outputs of raybatch runs (added by raybatch)."


def local_paths(settings: Settings) -> list[tuple[Path, bool]]:
    """The run's local state and outputs: (path, is a folder) for a local store and a SQLite file."""
    found: list[tuple[Path, bool]] = []
    if settings.store and not settings.store.lower().startswith("s3://"):
        found.append((Path(settings.store).expanduser(), True))
    url = make_url(settings.database_url.get_secret_value())
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        found.append((Path(str(url.database)).expanduser(), False))
    return found


def keep_out_of_uploads(
    paths: Sequence[tuple[Path, bool]],
    workdir: Path | None = None,
    *,
    notice: Callable[[str], None] = log.info,
) -> list[str]:
    """Add to ``workdir``'s .rayignore a line for each path inside it that it does not leave out
    yet; the lines added."""
    root = (workdir or Path.cwd()).resolve()
    ignore = root / IGNORE_FILE
    if not ignore.is_file():
        return []
    ignored = _matcher(root)
    lines = ignore.read_text(encoding="utf-8").splitlines()
    added = []
    for path, folder in paths:
        full = path.resolve()
        if not full.is_relative_to(root) or full == root or ignored(full / "object" if folder else full):
            continue
        line = f"/{full.relative_to(root).as_posix()}" + ("/" if folder else "*")  # a file's -wal, -shm
        if line not in lines:
            added.append(line)
    if added:
        text = "\n".join(([HEADER] if HEADER not in lines else []) + added)
        with ignore.open("a", encoding="utf-8") as handle:
            handle.write(("\n" if lines else "") + text + "\n")
        notice(f"{IGNORE_FILE}: added {', '.join(added)} (never uploaded by ray job submit)")
    return added


def _matcher(root: Path) -> Callable[[Path], bool]:
    """Whether the .rayignore leaves a path out, as ``ray job submit`` reads it."""
    try:
        from ray._private.runtime_env.packaging import _get_ignore_file
    except ImportError:  # another Ray: every path is checked by its own line only
        return lambda path: False
    match = _get_ignore_file(root, IGNORE_FILE)
    return (lambda path: False) if match is None else (lambda path: bool(match(path)))
