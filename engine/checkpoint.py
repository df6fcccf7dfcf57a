"""Checkpoints: weights, resolved config, vocabulary, optimiser state and epoch, as plain types.

Everything is a tensor, dict, list, str, int, float or bool, so checkpoints load with
``torch.load(weights_only=True)``: opening one never runs code. A resumed run (``trainer.resume``)
starts from the one :func:`find_resume` picks, with every random state :func:`rng_state` saved.
"""

from __future__ import annotations

import logging
import os
import pickle
import random
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from data.pipeline import with_defaults
from engine.io import save_torch

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


def find_resume(cfg: DictConfig, out_dir: Path) -> dict | None:
    """The checkpoint ``trainer.resume`` names: ``auto`` = this run directory's last.pt if there is one."""
    resume = cfg.trainer.get("resume")
    if not resume:
        return None
    path = out_dir / "checkpoints" / "last.pt" if resume == "auto" else Path(resume)
    if resume == "auto" and not path.is_file():
        log.info("trainer.resume=auto: no %s yet, starting from scratch", path)
        return None
    ckpt = load_checkpoint(path)
    now = OmegaConf.to_container(cfg, resolve=True)
    for key in ("dataset", "graph", "model", "optim"):
        theirs, ours = ckpt["config"].get(key), now.get(key)
        if key == "dataset":  # keys added since the checkpoint was written, as the data pipeline reads them
            theirs, ours = with_defaults(theirs), with_defaults(ours)
        if theirs != ours:
            raise ValueError(
                f"cannot resume from {path}: its {key} config differs from this run's; "
                f"resume with the same {key} overrides, or start a new run directory"
            )
    if "rng" not in ckpt:
        raise ValueError(f"cannot resume from {path}: it holds no training state (written by evaluate?)")
    log.info("resuming from %s after epoch %d", path, ckpt["epoch"])
    return ckpt


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
