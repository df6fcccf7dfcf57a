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
        return self.adj is None and bool(self.valid.all())

    def adjacency(self) -> torch.Tensor:
        """(B, n, n) bool, the true edges (no padding rows filled in)."""
        if self.adj is None:
            return self.valid[:, :, None] & self.valid[:, None, :]
        return self.adj


def layout(sizes: torch.Tensor, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(graph id, position in graph) of every node, and the (B, n) validity mask, from graph sizes."""
    sizes = sizes.to(device)
    b, n = len(sizes), int(sizes.max()) if len(sizes) else 0
    graph_id = torch.repeat_interleave(torch.arange(b, device=device), sizes)  # (N,)
    starts = torch.cumsum(sizes, 0) - sizes
    local = torch.arange(len(graph_id), device=device) - starts[graph_id]  # (N,)
    valid = torch.arange(n, device=device)[None, :] < sizes[:, None]  # (B, n)
    return graph_id, local, valid


def to_dense(g: dgl.DGLGraph, device, complete: bool = False, edge_types: bool = False) -> DenseGraph:
    """The dense twin of a batched graph. ``complete=True`` (complete graph with self loops) skips
    building the n x n mask: it is implied by the sizes. ``edge_types`` adds the (B, n, n) type matrix."""
    graph_id, local, valid = layout(g.batch_num_nodes(), device)
    n = valid.shape[1]
    index = graph_id * n + local
    if complete:
        etype = None
        if edge_types:
            pos = torch.full((len(valid) * n,), -1, dtype=torch.long, device=device)
            pos[index] = g.ndata["pos"].to(device)
            etype = positional_edge_types(pos.view(len(valid), n))
        return DenseGraph(valid, index, None, etype)
    src, dst = (e.to(device) for e in g.edges())
    adj = torch.zeros(valid.shape[0], n, n, dtype=torch.bool, device=device)
    adj[graph_id[dst], local[dst], local[src]] = True
    etype = None
    if edge_types:
        etype = torch.zeros(valid.shape[0], n, n, dtype=torch.long, device=device)
        etype[graph_id[dst], local[dst], local[src]] = g.edata["etype"].to(device)
    return DenseGraph(valid, index, adj, etype)
