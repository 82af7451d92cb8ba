"""raybatch: PDF bundles in, individual classified documents out, on Ray with Claude."""

import sys

from raybatch.collector import collect_seldom, in_ray_worker

__version__ = "0.1.0"

# PyMuPDF 2 imports its layout analyser and pymupdf4llm (ONNX runtime, numpy) on every
# ``import pymupdf``: about 0.5 s and 90 MB in each Ray worker. raybatch asks for neither
# (no ``get_layout``, no ``to_markdown``), so a process that imports raybatch first leaves them out;
# one that imported them already keeps them.
for _unused in ("pymupdf.layout", "pymupdf4llm"):
    sys.modules.setdefault(_unused, None)  # type: ignore[arg-type]

if in_ray_worker():
    collect_seldom()  # before the worker imports the rest of raybatch: a fifth of its start's CPU
