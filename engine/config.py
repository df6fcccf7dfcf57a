"""Checks on a composed config, made before any data is read: a value no code path accepts stops the run
at once, with a one-line error naming the valid values, instead of failing minutes in.

Each component checks its own keys where its typed config is made (``models.model_config``: the model
family's dataclass; ``data.graphs.graph_kind``: the graph construction; the dataset registry); this
module keeps only the rules that span groups, and returns what it checked, typed, so nothing is checked twice.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf

from data.datasets import DATASETS, DatasetEntry, dataset_entry
from data.graphs import GraphKind, graph_kind
from engine.distributed import DEVICES
from engine.loop import OPTIMISERS, PRECISIONS
from engine.tracking import MODES
from models import model_config


@dataclass(frozen=True)
class Checked:
    """The components of a config, each typed and checked once."""

    model: object  # the model family's typed config (models.EncoderConfig, models.RecursiveConfig, ...)
    graph: GraphKind
    dataset: DatasetEntry


def check_config(cfg: DictConfig) -> Checked:
    """Fail before any work on a value no code path accepts; each message lists the valid ones."""
    choices = [
        ("device", cfg.device, DEVICES),
        ("logger.mode", cfg.logger.mode, MODES),
        ("optim.name", cfg.optim.name, tuple(OPTIMISERS)),  # the optimisers train.py builds
        ("trainer.precision", cfg.trainer.get("precision", "fp32"), PRECISIONS),
    ]
    for key, value, valid in choices:
        if value not in valid:
            raise ValueError(f"unknown {key} {value!r}; valid: {', '.join(valid)}")
    dataset = dataset_entry(cfg.dataset.name)
    graph = graph_kind(cfg.graph.name)
    model = model_config(cfg.model)
    for key in ("trainer.max_epochs", "trainer.batch_size", "trainer.eval_batch_size"):
        value = OmegaConf.select(cfg, key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{key} must be an integer >= 1, got {value!r}")
    model.check(graph)
    if graph.text_only and not dataset.text:
        raise ValueError(
            f"graph={graph.name} is the dependency parse of text, and dataset={cfg.dataset.name} is not text: "
            "use graph=tree (the expression's own tree)"
        )
    if cfg.trainer.get("phrase_loss") and not dataset.treebank:
        treebanks = [d.name for d in DATASETS.values() if d.treebank]
        raise ValueError(
            f"trainer.phrase_loss=true trains on a label for every phrase, and dataset={cfg.dataset.name} has none: "
            f"use dataset={' or dataset='.join(treebanks)}, or trainer.phrase_loss=false"
        )
    return Checked(model, graph, dataset)


def exit_on_user_error(call: Callable[[], object]):
    """``call()``, and on a ValueError or OSError (the user's to fix: a bad value, a missing file, a full disk)
    one line ``error: ...`` on stderr and exit status 2, no traceback (``TAGNN_DEBUG=1`` shows it). The one
    error wrapper of train.py and evaluate.py."""
    try:
        return call()
    except (ValueError, OSError) as e:
        if os.environ.get("TAGNN_DEBUG"):
            raise
        print(f"error: {e.strerror if isinstance(e, OSError) and e.strerror else e}", file=sys.stderr)
        sys.exit(2)
