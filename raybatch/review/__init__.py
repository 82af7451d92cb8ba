"""Review: confidence signals (pure), the corrections that people make, and their API."""
