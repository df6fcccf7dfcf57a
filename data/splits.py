"""A dataset's splits (HF ``datasets``), read by its registry entry, and what is read off them in one go:
columns, token counts, the number of classes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import datasets

from data.datasets import dataset_entry, dataset_names

datasets.disable_progress_bars()  # our own bars say what is happening


def load_splits(cfg: Mapping, progress: bool = True) -> dict[str, datasets.Dataset]:
    """``{"train"|"val"|"test": Dataset}`` with columns tokens, label, heads, depth, length, group: read by the
    dataset's registry entry (``data/datasets.py``)."""
    return dataset_entry(cfg["name"]).load_splits(cfg, progress)


def with_defaults(cfg: Mapping) -> dict:
    """A dataset config with the keys added after it was written filled in as :func:`load_splits` reads
    them, so a checkpoint from before a key existed compares equal to the config that remakes its data."""
    entry = dataset_entry(cfg["name"]) if cfg.get("name") in dataset_names() else None
    return entry.upgrade(cfg) if entry is not None and entry.upgrade else dict(cfg)


def column(ds: datasets.Dataset, name: str) -> list:
    """One column as a list, converted by Arrow in one go (``ds[name]`` formats it row by row)."""
    return ds.with_format("arrow")[name].to_pylist()


def token_counts(ds: datasets.Dataset, name: str = "tokens") -> Counter:
    """How often each token occurs in the split: the counts :meth:`Vocab.build` makes, counted by Arrow."""
    import pyarrow.compute as pc

    counted = pc.value_counts(pc.list_flatten(ds.with_format("arrow")[name]))
    return Counter(dict(zip(counted.field("values").to_pylist(), counted.field("counts").to_pylist())))


def num_classes_of(cfg: Mapping, splits: dict, entry=None) -> int:
    """The dataset's fixed number of classes, else ``cfg``'s ``num_classes``, else the largest label + 1
    (``entry``: the dataset's registry entry, when the caller has it)."""
    fixed = (entry or dataset_entry(cfg["name"])).num_classes
    if fixed is not None:
        return fixed
    return int(cfg.get("num_classes") or max(max(ds["label"]) for ds in splits.values()) + 1)
