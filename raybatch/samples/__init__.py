"""The sample corpus: realistic multi-document PDF bundles and their ground truth (``truth.json``)."""

from raybatch.samples.noise import add_ocr_noise
from raybatch.samples.plan import CorpusPlan, plan_corpus
from raybatch.samples.truth import (
    Truth,
    TruthBundle,
    TruthDocument,
    TruthGroup,
    TruthPage,
    group_key,
    load_truth,
)
from raybatch.samples.write import write_samples

__all__ = [
    "CorpusPlan",
    "Truth",
    "TruthBundle",
    "TruthDocument",
    "TruthGroup",
    "TruthPage",
    "add_ocr_noise",
    "group_key",
    "load_truth",
    "plan_corpus",
    "write_samples",
]
