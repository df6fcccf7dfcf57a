"""Where a run computes: one decision, read by the memory plan, the encoders, ``train.py``, ``evaluate.py``
and the benchmarks.

It owns three choices:

* **the device** (``device=auto|cpu|cuda``; auto takes CUDA when torch sees a GPU);
* **where the graphs live**: on the model's device when this DGL build can put them there, else on the
  CPU. PyPI's DGL wheel is CPU-only, so with a GPU its graphs stay on the CPU and only their index tensors
  follow the model: the dense path (a padded batch and an adjacency mask, ``models/dense.py``) or message
  passing in stock torch (``models/torch_mp.py``); ``impl=sparse`` there runs the latter, and says so in
  one line of the log;
* **the impl of a batch** (``model.impl=sparse|dense|auto|torch_sparse``). ``sparse`` is DGL's message passing
  where DGL reaches the model's device, stock torch's elsewhere; ``torch_sparse`` is always stock torch's
  (the same function, tests/models/test_torch_message_passing.py). ``auto`` on the CPU is dense when edges fill at
  least ``dense_min_density`` of the padded batch's n x n pairs (the rule the committed CPU tables were made
  with); on a GPU it is dense for graphs up to :data:`GPU_DENSE_MAX_NODES` nodes, and the density rule above
  that. The GPU threshold is provisional, not measured: DGL's message passing has never been timed on a GPU
  (PyPI's DGL is CPU-only). The committed H100 table, ``bench/results/nvidia-h100/attention.md``, times
  stock-torch message passing (``models/torch_mp.py``) against a masked ``scaled_dot_product_attention``,
  and there a window graph's message passing is already faster from n = 1,024 (the tree's and bpt's from
  n = 4,096). Set it from a GPU measurement of DGL's kernels. With PyPI's DGL on a GPU ``auto`` stays dense
  at every size until ``bench.hardware_lottery --device cuda`` has timed the stock-torch path against dense.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch

log = logging.getLogger("train")  # train.py's logger: its warning reads ``[train]`` in train.log, as it always has
DEVICES = ("auto", "cpu", "cuda")
IMPLS = ("sparse", "dense", "auto", "torch_sparse")
GPU_DENSE_MAX_NODES = 4000  # impl=auto on a GPU: dense up to this many nodes per graph; provisional, unmeasured (above)


def sparse_error(device) -> str:
    """The one line that stops ``impl=sparse`` where DGL's graphs cannot follow a model with no stock-torch
    message passing (MiniLM)."""
    return (
        f"model.impl=sparse needs DGL's graphs on {device}, and this DGL build cannot put them there "
        "(PyPI's DGL wheel is CPU-only): install DGL's CUDA wheel (docs/troubleshooting.md) "
        "or use model.impl=dense or model.impl=auto"
    )


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


def choose_impl(
    impl: str,
    model_device: torch.device,
    graph_device: torch.device,
    n_max: int | Callable[[], int],
    density: Callable[[], float],
    dense_min_density: float,
    stock_torch: bool = False,
) -> str:
    """``sparse``, ``dense`` or ``torch_sparse`` for one batch (or one sentence length) whose largest graph has
    ``n_max`` nodes. ``density()`` (and ``n_max()``, when a callable; each asked only when needed): the share of
    the padded n x n pairs that are edges. ``stock_torch``: the model has message passing in stock torch (the
    encoder family's ``forward_edges``), which runs ``impl=sparse`` where DGL's graphs cannot follow the model."""
    if impl not in IMPLS:
        raise ValueError(f"unknown model.impl {impl!r}; valid: {', '.join(IMPLS)}")
    if impl == "torch_sparse" and not stock_torch:
        raise ValueError(
            "model.impl=torch_sparse: this model has no message passing in stock torch; use sparse or dense"
        )
    if graph_device != model_device:  # a CPU-only DGL keeps graphs on the CPU: their index tensors follow
        if impl in ("sparse", "torch_sparse"):
            if not stock_torch:
                raise ValueError(sparse_error(model_device))
            return "torch_sparse"
        return "dense"
    if impl != "auto":
        return impl
    if model_device.type != "cpu" and (n_max() if callable(n_max) else n_max) <= GPU_DENSE_MAX_NODES:
        return "dense"
    return "dense" if density() >= dense_min_density else "sparse"


@dataclass(frozen=True)
class Placement:
    """A run's placement: the model's device, where its graphs live, and the impl asked for."""

    device: torch.device  # the model's
    graphs: torch.device  # where batched DGL graphs live
    impl: str = "auto"  # sparse | dense | auto | torch_sparse, as model.impl asks

    @classmethod
    def decide(cls, device: str | torch.device = "auto", impl: str = "auto", warn: bool = True) -> Placement:
        """The device ``device`` names; graphs on it when DGL can put them there, else on the CPU (then
        ``impl=sparse`` runs message passing in stock torch, the others dense; one line of the log says which)."""
        if impl not in IMPLS:
            raise ValueError(f"unknown model.impl {impl!r}; valid: {', '.join(IMPLS)}")
        model_device = pick_device(device)
        if sparse_available(model_device):
            if impl == "torch_sparse" and warn:
                log.info(
                    "model.impl=torch_sparse: message passing in stock torch (models/torch_mp.py) on %s", model_device
                )
            return cls(model_device, model_device, impl)
        if warn and impl in ("sparse", "torch_sparse"):
            log.warning(
                "this DGL build is CPU-only: graphs stay on the CPU, model.impl=%s runs message passing in stock torch "
                "(models/torch_mp.py) on %s",
                impl,
                model_device,
            )
        elif warn:
            log.warning("this DGL build is CPU-only: graphs stay on the CPU, the model runs dense on %s", model_device)
        return cls(model_device, torch.device("cpu"), impl)

    @property
    def devices(self) -> tuple[torch.device, torch.device]:
        """(the model's device, the graphs'), as the loop and ``predict`` take them."""
        return self.device, self.graphs

    @property
    def sparse_ok(self) -> bool:
        return self.graphs == self.device

    def impl_for(
        self,
        n_max: int | Callable[[], int],
        density: Callable[[], float],
        dense_min_density: float,
        impl: str | None = None,
        stock_torch: bool = False,
    ):
        """:func:`choose_impl` on this placement (``impl``: the model's, if it differs from the run's)."""
        return choose_impl(
            impl or self.impl, self.device, self.graphs, n_max, density, dense_min_density, stock_torch=stock_torch
        )
