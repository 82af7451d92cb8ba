"""Review: confidence signals (pure), the corrections that people make, and their API."""

PAGE_SIZE = 50  # documents a page of the review queue shows unless told (``review list --limit``)
