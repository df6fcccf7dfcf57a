"""The dense twin of a batch of graphs: padded node features and a boolean adjacency mask.

Sparse message passing gathers and scatters along edges; the same computation on a padded batch
``(B, n, d)`` is a few dense matrix products, which is what CPUs and GPUs are built for (the
essay's "hardware lottery"). ``adj[b, i, j]`` is True when node j sends to node i in graph b,
exactly the edge ``j -> i`` of the DGL graph, so both impls compute the same function with the
same parameters (tests/models/test_dense.py checks every model x graph).

Only plain torch is used here, so the dense path runs on a GPU even with DGL's CPU-only wheel:
the batched DGLGraph stays on the CPU and only its index tensors travel.
"""

from __future__ import annotations

from dataclasses import dataclass

import dgl
import torch

from data.graphs.edges import positional_edge_types


@dataclass
class DenseGraph:
    """A padded batch. ``adj`` is None for complete graphs with self loops (every valid node
    receives from every valid node), which lets attention run with no mask when nothing is padded."""

    valid: torch.Tensor  # (B, n) bool: a real node, not padding
    index: torch.Tensor  # (N,) long: where each node of the flat batch sits in the flattened (B * n)
    adj: torch.Tensor | None  # (B, n, n) bool, adj[b, i, j]: j -> i
    etype: torch.Tensor | None = None  # (B, n, n) long: the type of edge j -> i (data.graphs.edges), when asked for
    # whether no node is padding, when the host knows it (a compiled step: False, so no read of the device
    # decides the shape of the work); None: read from ``valid``
    full: bool | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.valid.shape)

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) -> (B, n, ...), zeros at padding."""
        b, n = self.shape
        out = x.new_zeros((b * n,) + x.shape[1:])
        out[self.index] = x
        return out.view((b, n) + x.shape[1:])

    def unpad(self, x: torch.Tensor) -> torch.Tensor:
        """(B, n, ...) -> (N, ...)."""
        return x.reshape((-1,) + x.shape[2:])[self.index]

    def mask(self) -> torch.Tensor:
        """(B, n, n) bool mask to attend with. Rows with no incoming edge (padding, isolated nodes)
        get a self loop so a softmax over them is defined; :meth:`has_incoming` zeroes their output."""
        b, n = self.shape
        if self.adj is None:
            return self.valid[:, None, :].expand(b, n, n)
        eye = torch.eye(n, dtype=torch.bool, device=self.adj.device)
        return self.adj | (~self.adj.any(-1, keepdim=True) & eye)

    def has_incoming(self) -> torch.Tensor:
        """(B, n, 1) float: 1 where a node receives at least one message."""
        rows = self.valid if self.adj is None else self.adj.any(-1)
        return rows.unsqueeze(-1).float()

    def unmasked(self) -> bool:
        """True when plain, unmasked attention is exact: complete graphs and no padding."""
        if self.full is not None:  # said by the host: no read of the device (a compiled step)
            return self.adj is None and self.full
        return self.adj is None and bool(self.valid.all())

    def adjacency(self) -> torch.Tensor:
        """(B, n, n) bool, the true edges (no padding rows filled in)."""
        if self.adj is None:
            return self.valid[:, :, None] & self.valid[:, None, :]
        return self.adj


BUCKET_STEP = 16  # trainer.compile pads n up to a multiple of this ...
BUCKET_LINEAR_MAX = 256  # ... up to this many nodes, then to one of 8 sizes per octave (<= 12.5% more rows)


def bucket_length(n: int) -> int:
    """The padded length a compiled step gives a batch whose largest graph has ``n`` nodes: the next multiple
    of 16 up to 256 (ListOps' 100 tokens: 7 shapes, < 16 rows of padding, a large share of a short graph's:
    17 -> 32), then the next multiple of 1/8 of n's octave (257 -> 288, 1000 -> 1024): a few shapes per octave,
    so the compiled (CUDA-graphed) step is re-made a bounded number of times; above 256, under 12.5% more rows
    (under 27% more n x n pairs) than ``n``."""
    n = max(int(n), 1)
    if n <= BUCKET_LINEAR_MAX:
        return -(-n // BUCKET_STEP) * BUCKET_STEP
    step = 1 << (n.bit_length() - 4)  # n in [2^k, 2^(k+1)): step 2^(k-3)
    return -(-n // step) * step


def layout(sizes: torch.Tensor, device, pad_to: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(graph id, position in graph) of every node, and the (B, n) validity mask, from graph sizes; ``n`` is
    the largest size, or ``pad_to`` (at least that: no read of the sizes)."""
    sizes = sizes.to(device)
    b = len(sizes)
    n = pad_to if pad_to is not None else (int(sizes.max()) if b else 0)
    graph_id = torch.repeat_interleave(torch.arange(b, device=device), sizes)  # (N,)
    starts = torch.cumsum(sizes, 0) - sizes
    local = torch.arange(len(graph_id), device=device) - starts[graph_id]  # (N,)
    valid = torch.arange(n, device=device)[None, :] < sizes[:, None]  # (B, n)
    return graph_id, local, valid


def to_dense(
    g: dgl.DGLGraph, device, complete: bool = False, edge_types: bool = False, pad_to: int | None = None
) -> DenseGraph:
    """The dense twin of a batched graph. ``complete=True`` (complete graph with self loops) skips
    building the n x n mask: it is implied by the sizes. ``edge_types`` adds the (B, n, n) type matrix.
    ``pad_to``: n, at least the largest graph's size (:func:`bucket_length`); the result then says it is not
    ``full`` (masks always on: the same shapes and the same code at every batch of that n)."""
    graph_id, local, valid = layout(g.batch_num_nodes(), device, pad_to)
    n = valid.shape[1]
    index = graph_id * n + local
    full = None if pad_to is None else False
    if complete:
        etype = None
        if edge_types:
            pos = torch.full((len(valid) * n,), -1, dtype=torch.long, device=device)
            pos[index] = g.ndata["pos"].to(device)
            etype = positional_edge_types(pos.view(len(valid), n))
        return DenseGraph(valid, index, None, etype, full)
    src, dst = (e.to(device) for e in g.edges())
    adj = torch.zeros(valid.shape[0], n, n, dtype=torch.bool, device=device)
    adj[graph_id[dst], local[dst], local[src]] = True
    etype = None
    if edge_types:
        etype = torch.zeros(valid.shape[0], n, n, dtype=torch.long, device=device)
        etype[graph_id[dst], local[dst], local[src]] = g.edata["etype"].to(device)
    return DenseGraph(valid, index, adj, etype, full)
