"""Checkpoints: weights, resolved config, vocabulary, optimiser state and epoch, as plain types.

Everything is a tensor, dict, list, str, int, float or bool, so checkpoints load with
``torch.load(weights_only=True)``: opening one never runs code.
"""

from __future__ import annotations

import os
import pickle
import random
from pathlib import Path

import numpy as np
import torch

from engine.io import save_torch

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
