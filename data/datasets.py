"""The datasets: one :class:`DatasetEntry` per ``dataset=`` name, registered by the module that reads it
(``data/listops.py``: generated ListOps; ``data/text.py``: SST, SST-2, TREC, your files). Every module of the
``data`` package is imported the first time the registry is asked, so a new dataset is its module (with its
``register_dataset`` call) and its conf/dataset YAML.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass

SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class DatasetEntry:
    name: str
    load_splits: Callable  # (cfg, progress) -> {"train"|"val"|"test": datasets.Dataset}
    read_file: Callable  # (path, cfg, max_length) -> datasets.Dataset: evaluate.py's data_file=
    description: str = ""
    num_classes: int | None = None  # fixed; None: the config's num_classes, else the largest label + 1
    text: bool = False  # natural text with a dependency parse (graph=dep reads it)
    treebank: bool = False  # gold constituency trees with a label on every phrase (trainer.phrase_loss)
    unknown_limit: float = 0.0  # the share of out-of-vocabulary tokens a data_file may hold
    upgrade: Callable[[Mapping], dict] | None = None  # fills keys added since an old config was written
    splits: tuple[str, ...] = SPLITS


DATASETS: dict[str, DatasetEntry] = {}
_discovered = False


def register_dataset(entry: DatasetEntry) -> DatasetEntry:
    DATASETS[entry.name] = entry
    return entry


def _discover() -> None:
    global _discovered
    if not _discovered:
        _discovered = True
        import data

        for module in pkgutil.iter_modules(data.__path__):
            importlib.import_module(f"data.{module.name}")


def dataset_names() -> tuple[str, ...]:
    _discover()
    return tuple(DATASETS)


def dataset_entry(name: str) -> DatasetEntry:
    """The registered dataset ``name``; the one place an unknown dataset name is refused."""
    _discover()
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; valid datasets: {', '.join(DATASETS)}")
    return DATASETS[name]
