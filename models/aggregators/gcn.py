"""GCN's aggregator: a symmetric degree-normalised sum (Kipf & Welling, 2017).

    h_i' = Σ_{j∈N(i)} W h_j / sqrt(deg_in(i) · deg_out(j))

Every neighbour's weight is fixed by the graph: no attention, no heads (``num_heads`` is unused).
Degrees are clamped to at least 1, so a node with no incoming edge gets 0. The sparse path scales
each sender by 1 / sqrt(deg_out(j)), sums over the incoming edges (``copy_u`` + ``sum``) and scales
the receiver by 1 / sqrt(deg_in(i)); ``forward_edges`` is the same in stock torch (``models/torch_mp.py``);
the dense path is the same with the adjacency matrix A (B, n, n): D_in^-1/2 A D_out^-1/2 W h.

With ``edge_types`` (R-GCN, ``edge_types.py``) the normalised sum is taken per type, each with its
own weight: h_i' = Σ_t W_t Σ_{j∈N_t(i)} h_j / sqrt(deg_in(i) · deg_out(j)) + b (``forward_typed``).
"""

from __future__ import annotations

import dgl
import dgl.function as fn
import torch
from torch import nn

from models.aggregators.edge_types import typed_adjacency, typed_linear_sum, typed_linear_sum_edges
from models.dense import DenseGraph
from models.torch_mp import EdgeGraph


class GCNAggregation(nn.Module):
    """h_i' = Σ_{j∈N(i)} W h_j / sqrt(deg_in(i) · deg_out(j)); one W per edge type with ``edge_types``."""

    def __init__(self, dim: int, num_heads: int = 1, attn_dropout: float = 0.0, edge_types: int = 0):
        super().__init__()
        self.edge_types = edge_types
        self.linear = nn.Linear(dim * max(1, edge_types), dim)  # W (W_1 ... W_T side by side with edge types)
        self.last_attention = None  # GCN has no attention to record
        self.num_heads = 0

    def forward(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        """Message passing on ``g``: ``h`` (N, d) -> (N, d)."""
        if self.edge_types:
            return self.forward_typed(g, h)
        with g.local_scope():
            out_norm = g.out_degrees().clamp(min=1).float().pow(-0.5).unsqueeze(-1)  # (N, 1) 1/sqrt(deg_out(j))
            in_norm = g.in_degrees().clamp(min=1).float().pow(-0.5).unsqueeze(-1)  # (N, 1) 1/sqrt(deg_in(i))
            g.ndata["h"] = self.linear(h) * out_norm  # (N, d) W h_j / sqrt(deg_out(j))
            # h_i' = 1/sqrt(deg_in(i)) · Σ_{j∈N(i)} W h_j / sqrt(deg_out(j))          (N, d)
            g.update_all(fn.copy_u("h", "m"), fn.sum("m", "h"))
            return g.ndata["h"] * in_norm

    def forward_edges(self, h: torch.Tensor, eg: EdgeGraph) -> torch.Tensor:
        """The same lines in stock torch, on the edges ``eg`` (``models/torch_mp.py``): ``h`` (N, d) -> (N, d)."""
        out_norm = eg.out_degrees().clamp(min=1).float().pow(-0.5).unsqueeze(-1)  # (N, 1) 1/sqrt(deg_out(j))
        in_norm = eg.in_degrees().clamp(min=1).float().pow(-0.5).unsqueeze(-1)  # (N, 1) 1/sqrt(deg_in(i))
        if self.edge_types:  # R-GCN: 1/sqrt(deg_in(i)) · Σ_t W_t Σ_{j∈N_t(i)} h_j / sqrt(deg_out(j)) + b
            return typed_linear_sum_edges(eg, h * out_norm, self.linear, self.edge_types) * in_norm + self.linear.bias
        # h_i' = 1/sqrt(deg_in(i)) · Σ_{j∈N(i)} W h_j / sqrt(deg_out(j))                  (N, d)
        return eg.sum(eg.src_of(self.linear(h) * out_norm)) * in_norm

    def forward_dense(self, h: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        """The same on a padded batch: ``h`` (B, n, d) -> (B, n, d)."""
        if self.edge_types:
            return self.forward_typed_dense(h, dg)
        a = dg.adjacency().float()  # (B, n, n) a[b, i, j] = 1 for an edge j -> i
        in_norm = a.sum(-1).clamp(min=1).pow(-0.5).unsqueeze(-1)  # (B, n, 1)
        out_norm = a.sum(-2).clamp(min=1).pow(-0.5).unsqueeze(-1)  # (B, n, 1)
        # h' = D_in^-1/2 A D_out^-1/2 W h                                              (B, n, d)
        return in_norm * (a @ (self.linear(h) * out_norm))

    # ---- edge types (R-GCN) ----
    def forward_typed(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        """h_i' = 1/sqrt(deg_in(i)) · Σ_t W_t Σ_{j∈N_t(i)} h_j / sqrt(deg_out(j)) + b."""
        out_norm = g.out_degrees().clamp(min=1).float().pow(-0.5).unsqueeze(-1)  # (N, 1)
        in_norm = g.in_degrees().clamp(min=1).float().pow(-0.5).unsqueeze(-1)  # (N, 1)
        typed = typed_linear_sum(g, h * out_norm, self.linear, self.edge_types)  # (N, d)
        return typed * in_norm + self.linear.bias

    def forward_typed_dense(self, h: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        """The same on a padded batch: one normalised sum per type (B, T, n, d), then W over the T channels."""
        a = dg.adjacency().float()  # (B, n, n)
        in_norm = a.sum(-1).clamp(min=1).pow(-0.5).unsqueeze(-1)  # (B, n, 1)
        out_norm = a.sum(-2).clamp(min=1).pow(-0.5).unsqueeze(-1)  # (B, n, 1)
        typed = typed_adjacency(dg, self.edge_types, h.dtype) @ (h * out_norm).unsqueeze(1)  # (B, T, n, d)
        return self.linear((typed * in_norm.unsqueeze(1)).transpose(1, 2).flatten(2))  # (B, n, d)
