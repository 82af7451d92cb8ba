"""The job entrypoint of old, kept as an alias: ``python jobs/process.py ARGS`` is ``raybatch run ARGS``.

    ray job submit --working-dir . -- raybatch run SOURCE [--store S] [--db URL] [--mode M] ...

``raybatch run`` is the one entrypoint, on a laptop and in a Ray job alike (README, "Running on a
cluster"): the same flags, progress lines when its output is not a terminal, exit 1 when any job
failed and 2 on bad settings.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from raybatch.cli import main as raybatch


def main(argv: Sequence[str] | None = None) -> int:
    """``raybatch run`` with these arguments."""
    return raybatch(["run", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
