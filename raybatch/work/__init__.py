"""The work run inside Ray workers: preparing a chunk and writing its results, as plain classes."""
