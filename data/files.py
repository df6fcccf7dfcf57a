"""Checking files that a package ships (pretrained weights, word vectors) before they are used."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_of(path: str | Path, block_size: int = 1 << 22) -> str:
    """The SHA-256 hex digest of a file, read in blocks (weights and vectors are ~90 MB)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(block_size), b""):
            digest.update(block)
    return digest.hexdigest()
