"""The coordinator's identity: which database it serves, with which settings, on which code.

A detached named actor is found by its name and keeps whatever the name leaves out from the run that
created it. So the name is made from the database's own id (never its URL, which holds the
password), the Claude settings that shape what it sends and how (model, endpoint, a fingerprint of
the API key — never the key —, batch limits, polling, retries), and the raybatch version with a
digest of its code. A run whose settings or code differ gets a coordinator of its own; the one it no
longer matches is called by no driver: it finishes what it holds and exits once idle.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

import raybatch
from raybatch.settings import ClaudeSettings

# Chosen per run, not per coordinator: the mode comes with each offer, the caps from the database.
PER_RUN = frozenset({"processing_mode", "max_cost_usd", "max_daily_cost_usd"})


def coordinator_identity(claude: ClaudeSettings, database_id: str, code: str) -> str:
    """A short name-safe identity: the database's id, then a digest of the settings and the code."""
    shaping = claude.model_dump(mode="json", exclude={"anthropic_api_key", *PER_RUN})
    key = claude.anthropic_api_key.get_secret_value() if claude.anthropic_api_key else ""
    shaping["anthropic_api_key_sha256"] = hashlib.sha256(key.encode()).hexdigest()
    digest = hashlib.sha256(json.dumps([shaping, code], sort_keys=True).encode()).hexdigest()
    return f"{database_id[:16]}-{digest[:12]}"


@functools.cache
def code_version() -> str:
    """The raybatch version and a digest of its modules' source, read once per process."""
    root = Path(raybatch.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return f"{raybatch.__version__}+{digest.hexdigest()[:12]}"
