"""Will the largest batch fit? An estimate made before training, so a run too big for the machine stops
with a one-line error naming the settings to lower, instead of being killed by the kernel mid-epoch.

The estimate counts what a training step keeps for the backward pass, per layer: a few floats per edge
and head (message passing: scores, attention weights, messages), or per token pair and head (the dense
path: the (B, h, n, n) attention), and a few hidden vectors per node. The constants are upper envelopes
of the peaks ``bench/scaling.py`` measured (bench/results/scaling.csv: Transformer, d = 64, 4 heads,
4 layers, one batch of 8,192 tokens); tests/test_long_range.py checks the estimate against a measured
step. Where the free memory cannot be read (not Linux, no CUDA), nothing is checked.
"""

from __future__ import annotations

import torch

from data.graphs import GraphConstruction

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


def edges_per_graph(construction: GraphConstruction, n: int) -> int:
    """Edges of the graph of one n-token sentence (the complete graph by formula: it is n^2)."""
    if construction.name == "complete":
        return n * n
    if construction.name in ("tree", "binary_tree", "dep"):  # both ways along ~n tree edges, self loops
        return 5 * n
    return construction(list(range(n)), [-1] + [0] * (n - 1)).num_edges()


def estimate_bytes(model_cfg, construction: GraphConstruction, n: int, batch: int, impl: str) -> int:
    """Peak memory of one training step on ``batch`` sentences of ``n`` tokens."""
    if model_cfg.get("name") in ("treelstm", "recursive"):  # one pass up the tree: states per node
        return 4 * FLOATS_PER_NODE_DIM * batch * 2 * n * int(model_cfg.get("hidden_dim", 128))
    layers = int(model_cfg.get("num_layers", 1))
    hidden = int(model_cfg.get("hidden_dim", 64))
    heads = int(model_cfg.get("num_heads", 1))
    nodes = batch * (2 * n if construction.name in ("bpt", "binary_tree") else n)
    edges = batch * edges_per_graph(construction, n)
    per_layer = FLOATS_PER_NODE_DIM * nodes * hidden
    if impl == "dense":
        width = 2 * n if construction.name in ("bpt", "binary_tree") else n
        per_layer += FLOATS_PER_PAIR_HEAD * batch * width * width * heads
    else:
        per_layer += FLOATS_PER_EDGE_HEAD * edges * heads
    return 4 * layers * per_layer + BYTES_PER_EDGE_INDEX * edges


def check_fits(cfg, construction: GraphConstruction, lengths: list[int], device: torch.device, impl: str) -> None:
    """Raise a one-line ValueError if a batch of the longest training sentences would not fit in memory."""
    free = free_bytes(device)
    if free is None or not lengths:
        return
    batch = min(int(cfg.trainer.batch_size), len(lengths))
    n = max(lengths)
    dense = impl == "dense" or (impl == "auto" and construction.name == "complete")  # auto: dense when dense
    need = estimate_bytes(cfg.model, construction, n, batch, "dense" if dense else "sparse")
    if need > free:
        raise ValueError(
            f"a training batch of {batch} sentences of {n} tokens on graph={construction.name} needs about "
            f"{need / 2**30:.1f} GiB, but {free / 2**30:.1f} GiB are free: lower trainer.batch_size "
            f"(now {batch}) or dataset.max_length (now {cfg.dataset.get('max_length')}; the longest training "
            f"sentence has {n} tokens)"
        )


LAZY_EDGES = 100_000_000  # a split whose graphs would hold more edges than this builds them batch by batch


def lazy_graphs(construction: GraphConstruction, lengths: list[int]) -> bool:
    """Build this split's graphs per batch (``GraphDataset(lazy=True)``) rather than all at once? Only
    complete graphs get that big: 1,000 expressions of 1,000 tokens are 10^9 edges, 16 GB of indices."""
    return construction.name == "complete" and sum(n * n for n in lengths) > LAZY_EDGES
