"""The studies: one analysis each, written to one page under docs/results (see each folder's README.md)."""
