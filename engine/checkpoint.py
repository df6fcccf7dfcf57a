"""Checkpoints: weights, resolved config, vocabulary, optimiser state and epoch, as plain types.

Everything is a tensor, dict, list, str, int, float or bool, so checkpoints load with
``torch.load(weights_only=True)``: opening one never runs code.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

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
