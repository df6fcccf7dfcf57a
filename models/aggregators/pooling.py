"""Attention-free aggregators with a fixed reduction (GraphSAGE / GIN style):

    sum   h_i' = W · Σ_{j∈N(i)} h_j          (GIN, Xu et al., 2019: as expressive as 1-WL; ``gin.py``)
    mean  h_i' = W · mean_{j∈N(i)} h_j       (GraphSAGE-mean, Hamilton et al., 2017)
    max   h_i' = W · max_{j∈N(i)} h_j        (element-wise; GraphSAGE-pool without its σ(W h_j + b) per neighbour)

No scores, no softmax, no heads: every neighbour counts the same, whatever its content. A node
with no incoming edge gets ``W · 0`` (DGL's convention for empty reductions). The sparse path is one
``update_all(copy_u, sum | mean | max)`` (``forward_edges``: the same in stock torch, ``models/torch_mp.py``);
the dense path a product with the adjacency (sum, mean) or a masked maximum over each row (max; on a
complete graph one maximum per graph, shared by its rows).

With ``edge_types`` (R-GCN, ``edge_types.py``) the reduction runs per type, each with its own W:
h_i' = Σ_t W_t · Agg_{j∈N_t(i)} h_j + b; a type with no edge at a node contributes 0 (``forward_typed``).
"""

from __future__ import annotations

import dgl
import dgl.function as fn
import torch
from torch import nn

from models.aggregators.edge_types import type_onehot, typed_linear_sum, typed_linear_sum_edges
from models.dense import DenseGraph
from models.torch_mp import EdgeGraph


class PoolAggregation(nn.Module):
    """h_i' = W · Agg_{j∈N(i)} h_j with Agg one of sum, mean, max (``reduce``); one W per edge type with ``edge_types``."""

    REDUCERS = {"sum": fn.sum, "mean": fn.mean, "max": fn.max}

    def __init__(
        self, dim: int, num_heads: int = 1, attn_dropout: float = 0.0, reduce: str = "sum", edge_types: int = 0
    ):
        super().__init__()
        if reduce not in self.REDUCERS:
            raise ValueError(f"unknown reduction {reduce!r}; valid: {', '.join(self.REDUCERS)}")
        self.reduce, self.edge_types = reduce, edge_types
        self.linear = nn.Linear(dim * max(1, edge_types), dim)  # W (W_1 ... W_T side by side with edge types)
        self.last_attention, self.num_heads = None, 0

    def forward(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        """Message passing on ``g``: ``h`` (N, d) -> (N, d)."""
        if self.edge_types:
            return self.forward_typed(g, h)
        with g.local_scope():
            g.ndata["h"] = h
            # Agg_{j∈N(i)} h_j                                                          (N, d)
            g.update_all(fn.copy_u("h", "m"), self.REDUCERS[self.reduce]("m", "agg"))
            return self.linear(g.ndata["agg"])  # h_i' = W · Agg_j h_j

    def forward_edges(self, h: torch.Tensor, eg: EdgeGraph) -> torch.Tensor:
        """The same in stock torch, on the edges ``eg`` (``models/torch_mp.py``): ``h`` (N, d) -> (N, d)."""
        if self.edge_types:
            return self.forward_typed_edges(h, eg)
        # Agg_{j∈N(i)} h_j: eg.sum | eg.mean | eg.max of the senders' rows, 0 at a node with none   (N, d)
        return self.linear(getattr(eg, self.reduce)(eg.src_of(h)))  # h_i' = W · Agg_j h_j

    def forward_dense(self, h: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        """The same on a padded batch: ``h`` (B, n, d) -> (B, n, d)."""
        if self.reduce == "max" and dg.adj is None and not self.edge_types:  # complete graph with self loops
            return self.linear(self.max_complete(h, dg.valid))
        adj = dg.adjacency()  # (B, n, n) adj[b, i, j]: an edge j -> i
        if self.edge_types:
            typed = [self.reduce_dense(h, adj & (dg.etype == t)) for t in range(self.edge_types)]
            return self.linear(torch.cat(typed, -1))  # (B, n, T d) -> (B, n, d): Σ_t W_t Agg_t
        return self.linear(self.reduce_dense(h, adj))  # h_i' = W · Agg_j h_j

    @staticmethod
    def max_complete(h: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """max_j h_j on complete graphs with self loops (B, n, d): every node of a graph receives from
        all of them, so one maximum per graph, O(B n d), serves every row; :meth:`reduce_dense` builds
        (B, n, n, d) for the same numbers. ``amax`` splits the gradient evenly among tied maxima, as there,
        and the broadcast sums the rows' gradients first, so the gradients agree too (tests/models/test_pooling_and_heads.py)."""
        keep = valid[..., None]  # (B, n, 1)
        peak = h.masked_fill(~keep, float("-inf")).amax(1, keepdim=True)  # (B, 1, d)
        return peak.expand_as(h).masked_fill(~keep, 0.0)  # padding rows receive nothing: 0

    def reduce_dense(self, h: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        """Agg_{j∈N(i)} h_j (B, n, d) over the edges of ``adj`` (B, n, n); 0 at a node with none."""
        if self.reduce == "max":  # (B, n, n, d) at once: fine at sentence lengths
            msgs = h[:, None, :, :].masked_fill(~adj[..., None], float("-inf")).amax(2)  # (B, n, d)
            return msgs.masked_fill(~adj.any(-1, keepdim=True), 0.0)
        a = adj.to(h.dtype)
        agg = a @ h  # (B, n, d) Σ_j h_j
        return agg / a.sum(-1, keepdim=True).clamp(min=1) if self.reduce == "mean" else agg

    # ---- edge types (R-GCN) ----
    def forward_typed(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        """Σ_t W_t Agg_{j∈N_t(i)} h_j + b. Sum and mean are linear: each node is projected once per type
        and an edge carries one message; max keeps one channel per type and projects the T channels."""
        if self.reduce == "max":
            return self.linear(self.max_per_type(g, h).flatten(1))  # (N, T d) -> (N, d)
        weight = None
        if self.reduce == "mean":  # each message weighs 1 / (its receiver's in-edges of its type)
            _, dst = g.edges()
            weight = self.mean_weights(dst, g.edata["etype"], g.num_nodes(), h.dtype)
        return typed_linear_sum(g, h, self.linear, self.edge_types, weight) + self.linear.bias

    def forward_typed_edges(self, h: torch.Tensor, eg: EdgeGraph) -> torch.Tensor:
        """:meth:`forward_typed` in stock torch, on the edges ``eg``."""
        if self.reduce == "max":  # one channel per type: other types' messages at -inf, empty types set to 0
            off = torch.where(type_onehot(eg.etype, self.edge_types, h.dtype) > 0, 0.0, float("-inf"))  # (E, T)
            agg = eg.max(eg.src_of(h).unsqueeze(1) + off.unsqueeze(-1))  # (N, T, d)
            agg = torch.where(torch.isfinite(agg), agg, torch.zeros_like(agg))
            return self.linear(agg.flatten(1))  # (N, T d) -> (N, d)
        weight = self.mean_weights(eg.dst, eg.etype, eg.num_nodes, h.dtype) if self.reduce == "mean" else None
        return typed_linear_sum_edges(eg, h, self.linear, self.edge_types, weight) + self.linear.bias

    def mean_weights(self, dst: torch.Tensor, etype: torch.Tensor, num_nodes: int, dtype) -> torch.Tensor:
        """(E,): 1 / (the number of edges of edge e's type that its receiver gets)."""
        count = torch.zeros(num_nodes, self.edge_types, dtype=dtype, device=dst.device)
        count.index_put_((dst, etype), torch.ones_like(dst, dtype=dtype), accumulate=True)
        return 1.0 / count[dst, etype]

    def max_per_type(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        """(N, T, d): the max over each type's in-edges."""
        with g.local_scope():  # max: messages of other types are pushed to -inf, empty types set to 0
            g.srcdata["h"] = h.unsqueeze(1)  # (N, 1, d)
            onehot = type_onehot(g.edata["etype"], self.edge_types, h.dtype)
            g.edata["off"] = torch.where(onehot > 0, 0.0, float("-inf")).unsqueeze(-1)  # (E, T, 1)
            g.update_all(fn.u_add_e("h", "off", "m"), fn.max("m", "agg"))  # (N, T, d)
            agg = g.dstdata["agg"]
            return torch.where(torch.isfinite(agg), agg, torch.zeros_like(agg))


def pool(reduce: str):
    """The registry's factory for one reduction: ``pool("mean")(dim, num_heads, attn_dropout, edge_types)``."""

    def make(dim: int, num_heads: int = 1, attn_dropout: float = 0.0, edge_types: int = 0) -> PoolAggregation:
        return PoolAggregation(dim, num_heads, attn_dropout, reduce=reduce, edge_types=edge_types)

    return make
