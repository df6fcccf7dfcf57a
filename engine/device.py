"""Where a run computes: the model on ``device=auto|cpu|cuda``, its graphs wherever this DGL build can put them."""

from __future__ import annotations

import logging

import torch

log = logging.getLogger(
    "train"
)  # train.py's logger: the warning below reads ``[train]`` in train.log, as it always has
DEVICES = ("auto", "cpu", "cuda")


def pick_device(name: str) -> torch.device:
    """``auto`` takes CUDA when torch sees a GPU, else the CPU."""
    if name not in DEVICES:
        raise ValueError(f"unknown device {name!r}; valid: {', '.join(DEVICES)}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device=cuda but torch sees no GPU; use device=auto or device=cpu")
    return torch.device("cuda" if name == "cuda" or (name == "auto" and torch.cuda.is_available()) else "cpu")


def graph_device(device: torch.device, impl: str) -> torch.device:
    """Where batched DGL graphs live: on ``device`` if this DGL build can put them there, else on the
    CPU, and then only the dense impl can train (PyPI's DGL wheel has no CUDA)."""
    if device.type == "cpu":
        return device
    import dgl

    try:
        dgl.graph(([0], [0])).to(device)
        return device
    except Exception:
        if impl == "sparse":
            raise ValueError(
                "model.impl=sparse needs DGL with CUDA on a GPU, and this DGL build is CPU-only: install DGL's "
                "CUDA wheel (docs/troubleshooting.md) or use model.impl=dense or model.impl=auto"
            ) from None
        log.warning("this DGL build is CPU-only: graphs stay on the CPU, the model runs dense on %s", device)
        return torch.device("cpu")
