"""Where a run computes: one decision, read by the memory plan, ``train.py``, ``evaluate.py``
and the benchmarks.

It owns two choices:

* **the device** (``device=auto|cpu|cuda``; auto takes CUDA when torch sees a GPU);
* **where the graphs live**: on the model's device when this DGL build can put them there, else on the
  CPU. PyPI's DGL wheel is CPU-only, so with a GPU its graphs stay on the CPU and only their index tensors
  follow the model: the dense path (a padded batch and an adjacency mask, ``models/dense.py``) or message
  passing in stock torch (``models/torch_mp.py``); ``impl=sparse`` there runs the latter, and says so in
  one line of the log.

The impl of each batch (``model.impl``) is the model's to decide: ``models/impl.py`` (``choose_impl``), handed
the two devices this module decides.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import torch

log = logging.getLogger("train")  # train.py's logger: its warning reads ``[train]`` in train.log, as it always has
DEVICES = ("auto", "cpu", "cuda")


def pick_device(name: str | torch.device) -> torch.device:
    """``auto`` takes CUDA when torch sees a GPU, else the CPU."""
    if isinstance(name, torch.device):
        return name
    if name not in DEVICES:
        raise ValueError(f"unknown device {name!r}; valid: {', '.join(DEVICES)}")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device=cuda but torch sees no GPU; use device=auto or device=cpu")
    return torch.device("cuda" if name == "cuda" or (name == "auto" and torch.cuda.is_available()) else "cpu")


@functools.cache
def _dgl_reaches(device: str) -> bool:
    import dgl

    try:
        dgl.graph(([0], [0])).to(torch.device(device))
        return True
    except Exception:  # a CPU-only build raises (DGLError) on any other device
        return False


def dgl_reaches(device: torch.device) -> bool:
    """Can this DGL build put graphs on ``device``? (Asked once per device.)"""
    return device.type == "cpu" or _dgl_reaches(str(device))


def sparse_available(device: str | torch.device) -> bool:
    """Can DGL's message passing (``impl=sparse``) run on ``device``? Always on the CPU; on a GPU only with
    DGL's CUDA build."""
    return dgl_reaches(torch.device(device) if isinstance(device, str) else device)


@dataclass(frozen=True)
class Placement:
    """A run's placement: the model's device and where its graphs live."""

    device: torch.device  # the model's
    graphs: torch.device  # where batched DGL graphs live

    @classmethod
    def decide(cls, device: str | torch.device = "auto", impl: str = "auto", warn: bool = True) -> Placement:
        """The device ``device`` names; graphs on it when DGL can put them there, else on the CPU (then
        ``impl=sparse`` runs message passing in stock torch, the others dense; one line of the log says which).
        ``impl``: the model's ``model.impl`` (checked when its config was made), read for that line only."""
        model_device = pick_device(device)
        if sparse_available(model_device):
            if impl == "torch_sparse" and warn:
                log.info(
                    "model.impl=torch_sparse: message passing in stock torch (models/torch_mp.py) on %s", model_device
                )
            return cls(model_device, model_device)
        if warn and impl in ("sparse", "torch_sparse"):
            log.warning(
                "this DGL build is CPU-only: graphs stay on the CPU, model.impl=%s runs message passing in stock torch "
                "(models/torch_mp.py) on %s",
                impl,
                model_device,
            )
        elif warn:
            log.warning("this DGL build is CPU-only: graphs stay on the CPU, the model runs dense on %s", model_device)
        return cls(model_device, torch.device("cpu"))

    @property
    def devices(self) -> tuple[torch.device, torch.device]:
        """(the model's device, the graphs'), as the loop and ``predict`` take them."""
        return self.device, self.graphs
