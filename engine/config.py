"""Checks on a composed config, made before any data is read: a value no code path accepts stops the run
at once, with a one-line error naming the valid values, instead of failing minutes in."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from data.graphs import PE_GRAPHS, graph_kind
from data.pipeline import DATASETS
from data.text import TEXT_DATASETS, TREEBANKS
from engine.device import DEVICES
from engine.tracking import MODES
from models import MODELS, RECURSIVE_MODELS
from models.encoder import IMPLS, NORMS, POSITIONAL, READOUTS, UPDATES
from models.recursive import check_recursive


def check_config(cfg: DictConfig) -> None:
    """Fail before any work on a value no code path accepts; each message lists the valid ones."""
    choices = [
        ("dataset.name", cfg.dataset.name, DATASETS),
        ("model.name", cfg.model.name, MODELS),
        ("model.readout", cfg.model.readout, READOUTS),
        ("model.positional", cfg.model.positional, POSITIONAL),
        ("model.pe_graph", cfg.model.get("pe_graph", "tree"), PE_GRAPHS),
        ("model.norm", cfg.model.norm, NORMS),
        ("model.update", cfg.model.get("update", "residual"), UPDATES),
        ("model.impl", cfg.model.impl, IMPLS),
        ("device", cfg.device, DEVICES),
        ("logger.mode", cfg.logger.mode, MODES),
        ("optim.name", cfg.optim.name, ("adamw",)),  # the one optimiser train.py builds
    ]
    graph = graph_kind(cfg.graph.name)  # the one place graph names are checked
    for key, value, valid in choices:
        if value not in valid:
            raise ValueError(f"unknown {key} {value!r}; valid: {', '.join(valid)}")
    for key in (
        "trainer.max_epochs",
        "trainer.batch_size",
        "trainer.eval_batch_size",
        "model.hidden_dim",
        "model.num_layers",
        "model.num_heads",
    ):
        value = OmegaConf.select(cfg, key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{key} must be an integer >= 1, got {value!r}")
    if cfg.model.name in RECURSIVE_MODELS:
        cell = cfg.model.get("cell") or RECURSIVE_MODELS[cfg.model.name]
        check_recursive(cfg.model.name, cell, cfg.graph.name, cfg.model.readout)
    if graph.text_only and cfg.dataset.name not in TEXT_DATASETS:
        raise ValueError(
            f"graph={graph.name} is the dependency parse of text, and dataset={cfg.dataset.name} is not text: "
            "use graph=tree (the expression's own tree)"
        )
    if cfg.trainer.get("phrase_loss") and cfg.dataset.name not in TREEBANKS:
        raise ValueError(
            f"trainer.phrase_loss=true trains on a label for every phrase, and dataset={cfg.dataset.name} has none: "
            f"use dataset={' or dataset='.join(TREEBANKS)}, or trainer.phrase_loss=false"
        )
    if cfg.model.name in ("gat", "transformer") and cfg.model.hidden_dim % cfg.model.num_heads:
        raise ValueError(
            f"model.hidden_dim={cfg.model.hidden_dim} must be divisible by model.num_heads={cfg.model.num_heads}"
        )
