"""The console's views: one small module per kind of page, each a few routes calling one function."""
