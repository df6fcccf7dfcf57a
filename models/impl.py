"""``model.impl``: how a model computes a batch, decided here and nowhere else.

* ``sparse``: DGL's message passing where DGL's graphs reach the model's device; where they cannot (PyPI's
  CPU-only DGL beside a GPU) the same function in stock torch (``torch_sparse``), for a model that has it
  (the encoder family's ``forward_edges``); a model without it (MiniLM) is refused in one line
  (:func:`sparse_error`).
* ``torch_sparse``: message passing in stock torch (``models/torch_mp.py``) on any device (the same function,
  tests/models/test_torch_message_passing.py).
* ``dense``: the padded batch and an adjacency mask (``models/dense.py``).
* ``auto``: on the CPU dense when edges fill at least ``dense_min_density`` of the padded batch's n x n pairs
  (the rule the committed CPU tables were made with); on a GPU dense for graphs up to
  :data:`GPU_DENSE_MAX_NODES` nodes, the density rule above that; dense wherever DGL's graphs cannot follow
  the model. The GPU threshold is provisional, not measured: DGL's message passing has never been timed on a
  GPU (PyPI's DGL is CPU-only). The committed H100 table, ``bench/results/nvidia-h100/attention.md``, times
  stock-torch message passing (``models/torch_mp.py``) against a masked ``scaled_dot_product_attention``, and
  there a window graph's message passing is already faster from n = 1,024 (the tree's and bpt's from
  n = 4,096). Set it from a GPU measurement of DGL's kernels. With PyPI's DGL on a GPU ``auto`` stays dense
  at every size: the stock-torch path is used only where a run asks for ``impl=sparse``, until a GPU run of
  ``bench.hardware_lottery --device cuda`` trains it against dense and sets a threshold for it.

Where the model and its graphs live (the device, whether DGL's graphs can follow it) is
``engine/placement.py``'s; it hands :func:`choose_impl` the two devices and reads nothing else of this.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

IMPLS = ("sparse", "dense", "auto", "torch_sparse")
GPU_DENSE_MAX_NODES = 4000  # impl=auto on a GPU: dense up to this many nodes per graph; provisional, unmeasured (above)


def check_impl(impl: str, key: str = "model.impl", valid: tuple[str, ...] = IMPLS) -> str:
    """``impl``, or the one line that refuses it, naming the valid values (``key``: how the user set it)."""
    if impl not in valid:
        raise ValueError(f"unknown {key} {impl!r}; valid: {', '.join(valid)}")
    return impl


def sparse_error(device) -> str:
    """The one line that stops ``impl=sparse`` where DGL's graphs cannot follow a model with no stock-torch
    message passing (MiniLM)."""
    return (
        f"model.impl=sparse needs DGL's graphs on {device}, and this DGL build cannot put them there "
        "(PyPI's DGL wheel is CPU-only): install DGL's CUDA wheel (docs/troubleshooting.md) "
        "or use model.impl=dense or model.impl=auto"
    )


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
    ``n_max`` nodes (the module docstring's rule). ``density()`` (and ``n_max()``, when a callable; each asked
    only when needed): the share of the padded n x n pairs that are edges. ``stock_torch``: the model has message
    passing in stock torch (the encoder family's ``forward_edges``), which runs ``impl=sparse`` where DGL's
    graphs cannot follow the model."""
    check_impl(impl)
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
