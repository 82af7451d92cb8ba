"""The published schemas of raybatch's outputs (package data): ``manifest.v<N>.json``."""
