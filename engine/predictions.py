"""Which test examples a run got right, kept compactly in its ``results.json`` and record, so that two cells scored
on the same test split compare example by example (``tools.stats``). numpy only: the tables that read records are
drawn without torch."""

from __future__ import annotations

import base64

import numpy as np


def encode_correct(preds, labels, fingerprint: str) -> dict:
    """Which test examples a run got right, compactly, for comparisons example by example
    (``tools.stats``): ``{"n", "fingerprint", "correct"}``, ``correct`` one bit per example in the split's
    order (``numpy.packbits``, base64): 1,250 bytes for 10,000 examples. ``fingerprint`` names the split
    (``GraphDataset.fingerprint``); two runs are paired only when theirs match."""
    correct = (np.asarray(preds) == np.asarray(labels)).astype(np.uint8)  # tensors on the CPU, or arrays
    return {
        "n": int(len(correct)),
        "fingerprint": fingerprint,
        "correct": base64.b64encode(np.packbits(correct).tobytes()).decode("ascii"),
    }


def decode_correct(encoded: dict) -> np.ndarray:
    """The boolean vector ``encode_correct`` packed (length ``n``); a clear error for a damaged one."""
    try:
        bits = np.unpackbits(np.frombuffer(base64.b64decode(encoded["correct"], validate=True), dtype=np.uint8))
        n = int(encoded["n"])
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"damaged test predictions ({e}); rerun the run's test with trainer.resume=auto") from e
    if len(bits) < n or len(bits) - n >= 8:
        raise ValueError(f"test predictions hold {len(bits)} bits for {n} examples; rerun the run's test")
    return bits[:n].astype(bool)
