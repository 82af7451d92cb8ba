"""raybatch: PDF bundles in, individual classified documents out, on Ray with Claude."""

__version__ = "0.1.0"
