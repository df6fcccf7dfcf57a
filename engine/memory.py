"""Will the largest batch fit? An estimate made before training, so a run too big for the machine stops
with a one-line error naming the settings to lower, instead of being killed by the kernel mid-epoch.

The estimate counts what a training step keeps for the backward pass, per layer: a few floats per edge
and head (message passing: scores, attention weights, messages), or per token pair and head (the dense
path: the (B, h, n, n) attention), and a few hidden vectors per node. The constants are upper envelopes
of the peaks ``bench/scaling.py`` measured (bench/results/cpu-2core/scaling.csv: Transformer, d = 64, 4 heads,
4 layers, one batch of 8,192 tokens); tests/engine/test_long_range.py checks the estimate against a measured
step. Where the free memory cannot be read (not Linux, no CUDA), nothing is refused.
"""

from __future__ import annotations

import torch

from data.graphs import GraphConstruction
from engine.placement import Placement
from models import family_of
from models.impl import choose_impl
from models.registry import ModelConfig

FLOATS_PER_EDGE_HEAD = 6  # sparse: per edge and head, per layer (measured: about 2 for the Transformer)
FLOATS_PER_PAIR_HEAD = 6  # dense, through a mask: per (query, key) pair and head, per layer (measured: about 3)
FLOATS_PER_NODE_DIM = (
    28  # per node and hidden unit, per layer (projections, residuals, norms, feed-forward; measured: about 22)
)
BYTES_PER_EDGE_INDEX = 48  # src, dst, edge id and type (int64) of the graph itself, and DGL's CSR copies


def free_bytes(device: torch.device) -> int | None:
    """Memory a run can still take: free GPU memory, or Linux's MemAvailable; None if unknown."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


BYTES_PER_HELD_EDGE = 24  # a graph held in memory between epochs: src, dst and type (int64) per edge
HELD_SHARE = 0.5  # a split's graphs are built batch by batch when holding them all would take more of the free memory
UNKNOWN_FREE = 8 * 2**30  # what is assumed free where it cannot be read (lazy graphs only; nothing is refused)


def nodes_per_graph(construction: GraphConstruction, n: int) -> int:
    return construction.num_nodes(n)


def edges_per_graph(construction: GraphConstruction, n: int) -> int:
    """Edges of the graph of one n-token sentence, without building the big ones (its kind's count)."""
    return construction.edge_count(n)


def held_edges(construction: GraphConstruction, lengths: list[int]) -> int:
    """Edges of a whole split's graphs: summed per sentence where the construction counts them in closed
    form, else an upper bound (the per-token count of its longest sentence)."""
    if not lengths:
        return 0
    if construction.kind.edge_count is not None:
        return sum(edges_per_graph(construction, n) for n in lengths)
    longest = max(lengths)
    return int(edges_per_graph(construction, longest) / longest * sum(lengths))


def estimate_bytes(config: ModelConfig, construction: GraphConstruction, n: int, batch: int, impl: str) -> int:
    """Peak memory of one training step on ``batch`` sentences of ``n`` tokens (``impl``: sparse | dense), for
    a model of the typed ``config`` (``models.registry.LayeredConfig`` for a family counted per layer)."""
    if family_of(config.name).memory == "one_pass":  # one pass up the tree: states per node
        return 4 * FLOATS_PER_NODE_DIM * batch * 2 * n * config.hidden_dim
    layers, hidden, heads = config.num_layers, config.hidden_dim, config.num_heads
    width = nodes_per_graph(construction, n)
    edges = batch * edges_per_graph(construction, n)
    per_layer = FLOATS_PER_NODE_DIM * batch * width * hidden
    if impl == "dense":
        per_layer += FLOATS_PER_PAIR_HEAD * batch * width * width * heads
    else:
        per_layer += FLOATS_PER_EDGE_HEAD * edges * heads
    return 4 * layers * per_layer + BYTES_PER_EDGE_INDEX * edges


def runs_dense(config: ModelConfig, construction: GraphConstruction, n: int, devices) -> bool:
    """Will a batch of n-token sentences run on the dense path? As ``models.impl.choose_impl`` decides
    for every batch: always with impl=dense; with auto, when the graphs cannot follow the model to its device
    (DGL's CPU wheel and a GPU), on a GPU up to ``GPU_DENSE_MAX_NODES`` nodes, else when edges fill at least
    ``dense_min_density`` of the padded pairs. ``devices``: (the model's, the graphs'), or a ``Placement``;
    ``config``: the model's typed config."""
    impl = config.impl
    if family_of(config.name).memory == "one_pass" or impl in ("sparse", "torch_sparse"):
        return False
    model_device, graphs = devices.devices if isinstance(devices, Placement) else devices
    width = nodes_per_graph(construction, n)
    density = lambda: edges_per_graph(construction, n) / width**2  # noqa: E731
    return choose_impl(impl, model_device, graphs, width, density, config.dense_min_density) == "dense"


def memory_plan(run, construction: GraphConstruction, lengths: dict[str, list[int]], devices) -> dict[str, bool]:
    """Which splits build their graphs batch by batch (``GraphDataset(lazy=True)``): those whose graphs
    would take more than half the free memory. Raises a one-line ValueError, before any work, if the
    graphs held plus one training step on a batch of the longest training sentences would not fit.
    ``run``: the run's ``engine.config.RunConfig`` (its model, ``trainer.batch_size``, ``dataset.max_length``)."""
    devices = devices.devices if isinstance(devices, Placement) else devices
    free = free_bytes(devices[0])
    budget = HELD_SHARE * (free if free is not None else UNKNOWN_FREE)
    held = {s: BYTES_PER_HELD_EDGE * held_edges(construction, n) for s, n in lengths.items()}
    lazy = {s: b > budget for s, b in held.items()}
    train = lengths.get("train") or []
    if free is None or not train:
        return lazy
    n = max(train)
    impl = "dense" if runs_dense(run.model, construction, n, devices) else "sparse"
    one = estimate_bytes(run.model, construction, n, 1, impl)
    kept = sum(b for s, b in held.items() if not lazy[s])
    batch = run.trainer.batch_size
    need = kept + one * min(batch, len(train))
    if need > free:
        fits = int((free - kept) // one)
        how = (
            f"lower trainer.batch_size (now {batch}; at most {fits} fit) or dataset.max_length"
            if fits >= 1
            else "lower dataset.max_length"
        )
        raise ValueError(
            f"training on graph={construction.name} ({impl}) needs about {need / 2**30:.1f} GiB for a batch of "
            f"{min(batch, len(train))} sentences of {n} tokens, but {free / 2**30:.1f} GiB are free: {how} "
            f"(now {run.dataset_cfg.get('max_length')}), or model.hidden_dim / model.num_layers"
        )
    return lazy
