"""One sample corpus per session: six bundles, seed 7, as ``raybatch samples`` writes it by default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from raybatch.samples import CorpusPlan, Truth, load_truth, plan_corpus, write_samples

BUNDLES, SEED = 6, 7


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("samples")
    written: dict[str, Any] = write_samples(out, bundles=BUNDLES, seed=SEED)
    assert written == Truth.model_validate(written).model_dump(mode="json")
    return out


@pytest.fixture(scope="session")
def truth(corpus_dir: Path) -> Truth:
    return load_truth(corpus_dir / "truth.json")


@pytest.fixture(scope="session")
def plan() -> CorpusPlan:
    return plan_corpus(BUNDLES, SEED)
