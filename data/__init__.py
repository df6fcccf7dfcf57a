"""Data: ListOps generation and files, vocabularies, sentence-to-graph constructions, batching."""
