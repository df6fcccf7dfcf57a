"""A toy dataset for tests/engine/test_how_to_add.py, written as a new module of data/ is: ``dataset=first_token``.

The label is the first token (0 or 1) of a random string of 0s and 1s; a chain as its tree.
"""

from __future__ import annotations

import random

import datasets

from data.datasets import DatasetEntry, register_dataset


def load_splits(cfg, progress=True):
    """``{"train", "val", "test"}``: ``cfg.num_<split>`` strings of 2 to ``cfg.max_length`` tokens."""
    rng, out = random.Random(int(cfg["seed"])), {}
    for split in ("train", "val", "test"):
        rows = []
        for _ in range(int(cfg[f"num_{split}"])):
            tokens = [rng.choice("01") for _ in range(rng.randint(2, int(cfg["max_length"])))]
            heads = [-1] + list(range(len(tokens) - 1))
            rows.append({"tokens": tokens, "label": int(tokens[0]), "heads": heads, "length": len(tokens)})
        out[split] = datasets.Dataset.from_list(rows)
    return out


ENTRY = register_dataset(DatasetEntry("first_token", load_splits, None, "the first of 0/1 tokens", num_classes=2))
