"""A toy aggregator for tests/engine/test_how_to_add.py, written as a new module of models/aggregators/ is:
``model=rootsum``, the neighbours' sum scaled by the root of the in-degree (between ``sum`` and ``mean``):

    h_i' = W · Σ_{j∈N(i)} h_j / sqrt(max(1, deg_in(i)))

No scores, no heads; no edge types (it refuses them in one line).
"""

from __future__ import annotations

import dgl
import dgl.function as fn
import torch
from torch import nn

from models.dense import DenseGraph


class RootSumAggregation(nn.Module):
    """h_i' = W · Σ_{j∈N(i)} h_j / sqrt(max(1, deg_in(i)))."""

    def __init__(self, dim: int, num_heads: int = 1, attn_dropout: float = 0.0, edge_types: int = 0):
        super().__init__()
        if edge_types:
            raise ValueError("model=rootsum reads no edge types: set model.edge_types=false")
        self.linear = nn.Linear(dim, dim)  # W
        self.last_attention, self.num_heads = None, 0

    def forward(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        """Message passing on ``g``: ``h`` (N, d) -> (N, d)."""
        with g.local_scope():
            g.ndata["h"] = h
            # Σ_{j∈N(i)} h_j                                                            (N, d)
            g.update_all(fn.copy_u("h", "m"), fn.sum("m", "agg"))
            # / sqrt(max(1, deg_in(i)))                                                 (N, 1)
            scale = g.in_degrees().clamp(min=1).to(h.dtype).rsqrt().unsqueeze(-1)
            return self.linear(g.ndata["agg"] * scale)  # h_i' = W · ...

    def forward_dense(self, h: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        """The same on a padded batch: ``h`` (B, n, d) -> (B, n, d)."""
        a = dg.adjacency().to(h.dtype)  # (B, n, n) a[b, i, j]: an edge j -> i
        scale = a.sum(-1, keepdim=True).clamp(min=1).rsqrt()  # (B, n, 1)
        return self.linear((a @ h) * scale)
