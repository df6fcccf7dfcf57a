"""The run config, parsed and checked once: :func:`check_config` turns the composed Hydra config into a
:class:`RunConfig` (the dataset's registry entry, the graph's :class:`~data.graphs.GraphKind`, the model
family's typed config, the trainer's and optimiser's settings), before any data is read. A value no code path
accepts stops the run at once, with a one-line error naming the valid values, instead of failing minutes in.

Each component checks its own keys where its typed config is made (``models.model_config``: the model
family's dataclass; ``data.graphs.graph_kind``: the graph construction; the dataset registry); this
module keeps only the rules that span groups. Every later stage (``train.py``'s, ``engine/memory.py``,
``engine/checkpoint.py``, ``evaluate.py``) receives the typed parts and never parses ``cfg`` again
(``tests/engine/test_config.py`` checks that no other module calls the three parsers).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf

from data.datasets import DATASETS, DatasetEntry, dataset_entry
from data.graphs import GraphKind, graph_kind
from engine.distributed import DEVICES
from engine.loop import OPTIMISERS, PRECISIONS, EpochSettings
from engine.tracking import MODES
from models import model_config
from models.registry import ModelConfig


@dataclass(frozen=True)
class Parts:
    """The named components of a config (a run's, or a checkpoint's), each looked up and typed once."""

    model: ModelConfig | None  # the model family's typed config (models.EncoderConfig, models.RecursiveConfig, ...)
    graph: GraphKind | None
    dataset: DatasetEntry | None


def parse_parts(config: Mapping) -> Parts:
    """The registry entries of ``config``'s dataset and graph and its model's typed config (a section that
    is absent stays None): the one place a config's names are looked up, and the one place the model's config
    is checked against the graph (``ModelConfig.check``), once a run (``check_config``) or a checkpoint
    (``engine.checkpoint.load_model``)."""
    dataset = None if config.get("dataset") is None else dataset_entry(config["dataset"]["name"])
    graph = None if config.get("graph") is None else graph_kind(config["graph"]["name"])
    model = None if config.get("model") is None else model_config(config["model"])
    if model is not None and graph is not None:
        model.check(graph)
    return Parts(model, graph, dataset)


@dataclass(frozen=True)
class TrainerConfig:
    """``trainer:`` (conf/trainer/*.yaml), typed."""

    max_epochs: int
    batch_size: int
    eval_batch_size: int
    precision: str  # fp32 | bf16
    progress: bool
    bucket_by_length: bool
    log_every: int
    phrase_loss: bool
    resume: str | None
    heartbeat_s: float = 0.0  # configs written before trainer.heartbeat_s: no heartbeat
    compile: bool = False  # torch.compile the dense forward on bucketed shapes (engine/compiled.py)
    device_batches: bool = (
        False  # training, validation and test batches made on the model's device (data/device_batches.py)
    )

    @classmethod
    def from_mapping(cls, t: Mapping) -> TrainerConfig:
        return cls(
            max_epochs=int(t["max_epochs"]),
            batch_size=int(t["batch_size"]),
            eval_batch_size=int(t["eval_batch_size"]),
            precision=str(t.get("precision", "fp32")),  # configs written before trainer.precision: fp32
            progress=bool(t["progress"]),
            bucket_by_length=bool(t["bucket_by_length"]),
            log_every=int(t["log_every"]),
            phrase_loss=bool(t.get("phrase_loss")),
            resume=t.get("resume"),
            heartbeat_s=float(t.get("heartbeat_s", 0)),
            compile=bool(t.get("compile", False)),  # configs written before trainer.compile: eager
            device_batches=bool(t.get("device_batches", False)),  # configs written before it: DGL's batches
        )


@dataclass(frozen=True)
class OptimConfig:
    """``optim:`` (conf/optim/*.yaml), typed. ``betas``: None for an optimiser without them (adagrad)."""

    name: str
    lr: float
    weight_decay: float
    schedule: str  # cosine | linear
    warmup_ratio: float
    min_lr_ratio: float
    grad_clip: float | None
    betas: tuple[float, ...] | None

    @classmethod
    def from_mapping(cls, o: Mapping) -> OptimConfig:
        betas = o.get("betas")
        return cls(
            name=str(o["name"]),
            lr=float(o["lr"]),
            weight_decay=float(o["weight_decay"]),
            schedule=str(o.get("schedule", "cosine")),  # the only schedule before optim.schedule existed
            warmup_ratio=float(o["warmup_ratio"]),
            min_lr_ratio=float(o["min_lr_ratio"]),
            grad_clip=o["grad_clip"],
            betas=None if betas is None else tuple(float(b) for b in betas),
        )

    def get(self, key: str, default=None):
        """``optim.get(key)`` as on the YAML mapping (``engine.loop``'s readers take either)."""
        return getattr(self, key, default)


@dataclass(frozen=True)
class RunConfig:
    """One training run's config, typed and checked once by :func:`check_config`; the stages of ``train.py``
    receive it (or its parts). ``dataset_cfg`` and ``graph_cfg`` are the sections their own readers take
    (the dataset's loader its keys; the construction its settings: ``self_loops``, ``window``, ``k``)."""

    dataset: DatasetEntry
    graph: GraphKind
    model: ModelConfig
    trainer: TrainerConfig
    optim: OptimConfig
    device: str  # auto | cpu | cuda
    seed: int
    dataset_cfg: Mapping
    graph_cfg: Mapping
    resolved: dict  # the whole config, resolved: what checkpoints and W&B record, and what a resume compares

    @property
    def logger(self) -> dict:
        return self.resolved["logger"]

    def epoch_settings(self, progress: bool | None = None) -> EpochSettings:
        """What one epoch reads (``progress``: whether bars show; default ``trainer.progress``)."""
        t = self.trainer
        bars = t.progress if progress is None else progress
        return EpochSettings(
            t.max_epochs, bars, self.optim.grad_clip, t.phrase_loss, t.log_every, t.precision, t.heartbeat_s
        )


def check_config(cfg: DictConfig) -> RunConfig:
    """The run's :class:`RunConfig`; fails before any work on a value no code path accepts, each message
    listing the valid ones."""
    check_choices(cfg)
    parts = parse_parts(cfg)
    for key in ("trainer.max_epochs", "trainer.batch_size", "trainer.eval_batch_size"):
        value = OmegaConf.select(cfg, key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{key} must be an integer >= 1, got {value!r}")
    heartbeat = OmegaConf.select(cfg, "trainer.heartbeat_s", default=0)
    if isinstance(heartbeat, bool) or not isinstance(heartbeat, int | float) or heartbeat < 0:
        raise ValueError(f"trainer.heartbeat_s must be a number of seconds >= 0 (0: off), got {heartbeat!r}")
    check_across(cfg, parts)
    return RunConfig(
        dataset=parts.dataset,
        graph=parts.graph,
        model=parts.model,
        trainer=TrainerConfig.from_mapping(cfg.trainer),
        optim=OptimConfig.from_mapping(cfg.optim),
        device=str(cfg.device),
        seed=int(cfg.seed),
        dataset_cfg=cfg.dataset,
        graph_cfg=cfg.graph,
        resolved=OmegaConf.to_container(cfg, resolve=True),
    )


def check_choices(cfg: DictConfig) -> None:
    """The top-level values with a fixed set of choices (the device, W&B's mode, the optimiser, the precision)."""
    choices = [
        ("device", cfg.device, DEVICES),
        ("logger.mode", cfg.logger.mode, MODES),
        ("optim.name", cfg.optim.name, tuple(OPTIMISERS)),  # the optimisers train.py builds
        ("trainer.precision", cfg.trainer.get("precision", "fp32"), PRECISIONS),
    ]
    for key, value, valid in choices:
        if value not in valid:
            raise ValueError(f"unknown {key} {value!r}; valid: {', '.join(valid)}")


def check_across(cfg: DictConfig, parts: Parts) -> None:
    """The rules that span groups: the graph and the dataset, the loss and the dataset (the model and the graph:
    :func:`parse_parts`)."""
    dataset, graph = parts.dataset, parts.graph
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
