"""Byte units, each named for what it is.

``MB`` is a decimal megabyte (10⁶ bytes): request and batch sizes, the way Anthropic states its
256 MB batch limit (``BATCH_MAX_MB``). ``MIB`` is a binary mebibyte (2²⁰ bytes): memory and
source-file sizes (``MAX_CONCURRENT_MB``, the writers' thresholds, the workers' memory estimates).
"""

MB = 1_000_000
MIB = 1 << 20
