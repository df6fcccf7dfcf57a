"""Checkpoints: weights, resolved config, vocabulary, optimiser state and epoch, as plain types.

Everything is a tensor, dict, list, str, int, float or bool, so checkpoints load with
``torch.load(weights_only=True)``: opening one never runs code. A resumed run (``trainer.resume``)
starts from the one :func:`find_resume` picks, with every random state :func:`rng_state` saved.
"""

from __future__ import annotations

import csv
import logging
import os
import pickle
import random
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import torch

from data.splits import with_defaults
from data.vocab import Vocab
from engine.config import parse_parts
from engine.io import save_torch
from models import build_model, family_of, make_construction
from models.aggregators import DEFAULT_AGGREGATOR

log = logging.getLogger("train")  # train.py's logger: resume lines read ``[train]`` in train.log, as they always have
FORMAT = "tagnn-checkpoint-v1"
REQUIRED = ("format", "model", "config", "vocab", "num_classes", "epoch")


def save_checkpoint(path: str | os.PathLike, **state) -> Path:
    return save_torch(path, {"format": FORMAT, **state})


def load_checkpoint(path: str | os.PathLike | None) -> dict:
    """Load and check a checkpoint; every failure is a one-line ``ValueError``/``FileNotFoundError``."""
    if not path:
        raise FileNotFoundError("no checkpoint given: pass checkpoint=outputs/<run>/checkpoints/best.pt")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no checkpoint at {path}: pass checkpoint=outputs/<run>/checkpoints/best.pt (train.py writes it)"
        )
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, pickle.UnpicklingError, OSError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(
            f"{path} is not a readable tagnn checkpoint (truncated or foreign: {first}); "
            "retrain or use another checkpoint such as checkpoints/last.pt"
        ) from None
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT or any(k not in ckpt for k in REQUIRED):
        raise ValueError(
            f"{path} is not a {FORMAT} checkpoint (written by another program?); pass one written by train.py"
        )
    return ckpt


# What the code did with a model key before the key existed: a checkpoint whose config lacks one was
# trained (and is evaluated) with these values. New runs take every value from conf/ (the YAML is the only
# source of defaults); these are history, not defaults.
LEGACY_MODEL_VALUES = {
    "scaled": True,
    "pe_dim": 8,
    "pe_graph": "tree",
    "impl": "sparse",
    "dense_min_density": 0.0,
    "edge_types": False,
    "update": "residual",
    "cell": None,
    "embeddings": "learned",
    "glove_freeze": True,  # unused with learned embeddings
    "structure_bias": "none",  # model=minilm's soft syntax (issue 33): off before it existed
    "syntax_layers": 0,
    "syntax_aggregator": DEFAULT_AGGREGATOR,
    "structure_bias_lr_scale": 1.0,
}


def upgrade_config(config: dict) -> dict:
    """A resolved config (a checkpoint's, of any age, or this run's) in today's form: the model section holds
    exactly its family's keys (keys it never used, such as the shared encoder's in an old Tree-LSTM config,
    are dropped; keys added since are filled as the code then behaved), the dataset section the keys added
    since, as the data pipeline reads them. The one place old checkpoints are made to fit the new code."""
    out = dict(config)
    if out.get("model") is not None:
        model = dict(out["model"])
        keys = [f.name for f in fields(family_of(model["name"]).config)]
        out["model"] = {k: model.get(k, LEGACY_MODEL_VALUES.get(k)) for k in keys}
    if out.get("dataset") is not None:
        out["dataset"] = with_defaults(out["dataset"])
    if out.get("optim") is not None and "schedule" not in out["optim"]:
        out["optim"] = {**out["optim"], "schedule": "cosine"}  # the only schedule before optim.schedule existed
    return out


def load_model(ckpt: dict, path: str | os.PathLike = "checkpoint"):
    """Rebuild ``(model, vocab, construction, config)`` from a loaded checkpoint (``config``: upgraded)."""
    config, vocab = upgrade_config(ckpt["config"]), Vocab(ckpt["vocab"])
    parts = parse_parts({"graph": config["graph"], "model": config["model"]})
    construction = make_construction(config["graph"], vocab, parts.model)
    model = build_model(parts.model, vocab, int(ckpt["num_classes"]), construction)
    rows = ckpt["model"].get("embed.weight", ckpt["model"].get("embed.found"))  # learned | glove
    # a family with its own tokenizer has its vocabulary in its weights, not in ckpt["vocab"]
    own_tokens = family_of(config["model"]["name"]).own_tokenizer
    if not own_tokens and (rows is None or rows.shape[0] != len(vocab)):
        raise ValueError(
            f"{path}: its weights do not match its vocabulary ({None if rows is None else rows.shape[0]} "
            f"embeddings, {len(vocab)} tokens); it was not written by this version of train.py"
        )
    model.load_state_dict(ckpt["model"])
    return model, vocab, construction, config


def find_resume(run, out_dir: Path) -> dict | None:
    """The checkpoint ``trainer.resume`` names: ``auto`` = this run directory's last.pt if there is one
    (``run``: the run's ``engine.config.RunConfig``)."""
    resume = run.trainer.resume
    if not resume:
        return None
    path = out_dir / "checkpoints" / "last.pt" if resume == "auto" else Path(resume)
    if resume == "auto" and not path.is_file():
        log.info("trainer.resume=auto: no %s yet, starting from scratch", path)
        return None
    ckpt = load_checkpoint(path)
    theirs_all, ours_all = upgrade_config(ckpt["config"]), upgrade_config(run.resolved)
    for key in ("dataset", "graph", "model", "optim"):
        theirs, ours = theirs_all.get(key), ours_all.get(key)
        if theirs != ours:
            raise ValueError(
                f"cannot resume from {path}: its {key} config differs from this run's; "
                f"resume with the same {key} overrides, or start a new run directory"
            )
    if "rng" not in ckpt:
        raise ValueError(f"cannot resume from {path}: it holds no training state (written by evaluate?)")
    log.info("resuming from %s after epoch %d", path, ckpt["epoch"])
    return ckpt


@dataclass
class Progress:
    """How far training has come; every checkpoint carries it, so a resumed run goes on from there."""

    best_val: float = -1.0
    best_epoch: int = 0
    step: int = 0
    train_seconds: float = 0.0
    seen_examples: int = 0
    epoch: int = 0  # the last finished epoch
    rows: list[dict] = field(default_factory=list)  # metrics.csv's rows of the finished epochs

    KEYS = {"best_val": "best_val_acc"}  # a field whose checkpoint key has another name

    def to_dict(self) -> dict:
        """The counters under their checkpoint keys (the rows live in metrics.csv, not in the checkpoint)."""
        return {self.KEYS.get(k, k): v for k, v in asdict(self).items() if k != "rows"}

    @classmethod
    def from_dict(cls, ckpt: dict, rows: list[dict] | None = None) -> Progress:
        names = [f.name for f in fields(cls) if f.name != "rows"]
        return cls(**{k: ckpt[cls.KEYS.get(k, k)] for k in names}, rows=rows or [])


def resume(ckpt: dict | None, model, optimizer, scheduler, data_rng: torch.Generator, metrics_path: Path) -> Progress:
    """Go on from ``ckpt`` (:func:`find_resume`'s; None: from scratch): weights, optimiser, schedule, random
    states, counters, and the metrics.csv rows of the epochs it holds (not of later ones, which it does not)."""
    if not ckpt:
        return Progress()
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler.load_state_dict(ckpt["scheduler"])
    restore_rng(ckpt["rng"], data_rng)
    rows = []
    if metrics_path.is_file():
        with open(metrics_path, newline="") as f:
            rows = [r for r in csv.DictReader(f) if int(r["epoch"]) <= ckpt["epoch"]]
    return Progress.from_dict(ckpt, rows)


def seed_everything(seed: int) -> None:
    """Seed python's, numpy's and torch's global generators (the states :func:`rng_state` saves)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state(data_rng: torch.Generator) -> dict:
    """Every random state training consumes (dropout, batch order, python, numpy), as plain types."""
    version, mt, gauss = random.getstate()
    _, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "data": data_rng.get_state(),
        "python": {"version": version, "state": list(mt), "gauss": gauss},
        "numpy": {
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
    }


def restore_rng(state: dict, data_rng: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    data_rng.set_state(state["data"])
    py = state["python"]
    random.setstate((py["version"], tuple(py["state"]), py["gauss"]))
    npy = state["numpy"]
    np.random.set_state(("MT19937", npy["keys"].numpy().astype(np.uint32), npy["pos"], npy["has_gauss"], npy["cached"]))
