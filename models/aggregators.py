"""The one thing that changes between GCN, GAT and the Transformer: how a node weighs its neighbours.

Every aggregator maps node features ``h`` (N, d) on a graph ``g`` to messages summed at each
node, ``(N, d)``. With ``N(i)`` the nodes that send to i (edges ``j -> i``):

  GCN          h_i' = W · Σ_{j∈N(i)} h_j / sqrt(deg(i) · deg(j))          fixed weights
  GAT          h_i' = O · ‖_heads Σ_{j∈N(i)} a_ij W h_j,
               a_ij = softmax_j LeakyReLU(a_dst·W h_i + a_src·W h_j)      learned, additive
  Transformer  h_i' = O · ‖_heads Σ_{j∈N(i)} a_ij W_V h_j,
               a_ij = softmax_j (W_Q h_i · W_K h_j / sqrt(d_h))          learned, dot product

Each is written with DGL's built-in message functions (``fn.u_dot_v``, ``fn.u_mul_e``,
``fn.sum``) and ``edge_softmax``, which normalises scores over each node's incoming edges.
On the complete graph the Transformer's aggregator *is* multi-head self-attention
(tests/test_aggregators.py checks it against ``torch.nn.functional.scaled_dot_product_attention``).

Each aggregator also has ``forward_dense(h, dg)``: the same equation, with the same parameters, on
a padded batch ``(B, n, d)`` and its adjacency mask (``models/dense.py``). Messages become matrix
products, the fast path on dense hardware; tests/test_dense.py checks the two agree.
"""

from __future__ import annotations

import math

import dgl
import dgl.function as fn
import torch
import torch.nn.functional as F
from dgl.nn.functional import edge_softmax
from torch import nn

from models.dense import DenseGraph


class GCNAggregation(nn.Module):
    """Symmetric degree-normalised sum (Kipf & Welling, 2017): every neighbour weighs
    ``1 / sqrt(deg_in(i) · deg_out(j))``, fixed by the graph, no attention. ``num_heads`` is unused."""

    def __init__(self, dim: int, num_heads: int = 1, attn_dropout: float = 0.0):
        super().__init__()
        self.linear = nn.Linear(dim, dim)
        self.last_attention = None  # GCN has no attention to record
        self.num_heads = 0

    def forward(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        with g.local_scope():
            out_norm = g.out_degrees().clamp(min=1).float().pow(-0.5).unsqueeze(-1)  # (N, 1)
            in_norm = g.in_degrees().clamp(min=1).float().pow(-0.5).unsqueeze(-1)  # (N, 1)
            g.ndata["h"] = self.linear(h) * out_norm  # (N, d) W h_j / sqrt(deg_out(j))
            g.update_all(fn.copy_u("h", "m"), fn.sum("m", "h"))  # Σ_j over incoming edges
            return g.ndata["h"] * in_norm  # (N, d)

    def forward_dense(self, h: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        a = dg.adjacency().float()  # (B, n, n) a[b, i, j] = 1 for an edge j -> i
        in_norm = a.sum(-1).clamp(min=1).pow(-0.5).unsqueeze(-1)  # (B, n, 1)
        out_norm = a.sum(-2).clamp(min=1).pow(-0.5).unsqueeze(-1)  # (B, n, 1)
        return in_norm * (a @ (self.linear(h) * out_norm))  # (B, n, d)


class _MultiHeadAttention(nn.Module):
    """Shared by GAT and the Transformer: scores per edge -> edge_softmax -> weighted sum -> O."""

    def __init__(self, dim: int, num_heads: int, attn_dropout: float = 0.0):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"model.hidden_dim={dim} must be divisible by model.num_heads={num_heads}")
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.out = nn.Linear(dim, dim)  # O: mixes the concatenated heads
        self.attn_dropout = nn.Dropout(attn_dropout)
        self.record_attention = False  # set True to keep the weights (E, H) in last_attention
        self.last_attention = None
        self.head_mask = None  # (H,) 0/1 per head: 0 silences a head (tools/prune_heads.py); None keeps all

    def _mask_heads(self, agg: torch.Tensor, head_dim: int) -> torch.Tensor:
        """``agg`` with the masked heads zeroed; heads are on dimension ``head_dim``."""
        if self.head_mask is None:
            return agg
        shape = [1] * agg.dim()
        shape[head_dim] = self.num_heads
        return agg * self.head_mask.to(agg).view(shape)

    def aggregate(self, g: dgl.DGLGraph, scores: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """``scores`` (E, H, 1) on edges, ``values`` (N, H, d_h) on nodes -> (N, d)."""
        with g.local_scope():
            a = edge_softmax(g, scores)  # (E, H, 1) sums to 1 over each node's incoming edges
            if self.record_attention:
                self.last_attention = a.detach().squeeze(-1)  # (E, H)
            g.srcdata["v"] = values  # (N, H, d_h)
            g.edata["a"] = self.attn_dropout(a)
            g.update_all(fn.u_mul_e("v", "a", "m"), fn.sum("m", "agg"))  # (N, H, d_h)
            return self.out(self._mask_heads(g.dstdata["agg"], 1).flatten(1))  # (N, d)

    def aggregate_dense(self, scores: torch.Tensor, values: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        """``scores`` (B, H, n, n) for every pair, ``values`` (B, H, n, d_h) -> (B, n, d)."""
        a = torch.softmax(scores.masked_fill(~dg.mask()[:, None], float("-inf")), dim=-1)  # (B, H, n, n)
        if self.record_attention:
            self.last_attention = a.detach()  # dense: (B, H, n, n), row i = what node i attends to
        agg = self._mask_heads(self.attn_dropout(a) @ values, 1).transpose(1, 2).flatten(2)  # (B, n, d)
        return self.out(agg * dg.has_incoming())  # a node with no incoming edge gets O(0), as in sparse


class GATAttention(_MultiHeadAttention):
    """Additive attention (Veličković et al., 2018): ``a_ij = softmax_j LeakyReLU(a_dst·Wh_i + a_src·Wh_j)``.

    Unlike the original GAT the heads are mixed by an output projection O, as in the
    Transformer, so the two differ only in their score function.
    """

    def __init__(self, dim: int, num_heads: int = 4, attn_dropout: float = 0.0, negative_slope: float = 0.2):
        super().__init__(dim, num_heads, attn_dropout)
        self.proj = nn.Linear(dim, dim, bias=False)  # W
        self.attn_src = nn.Parameter(torch.empty(num_heads, self.head_dim))  # a_src (H, d_h)
        self.attn_dst = nn.Parameter(torch.empty(num_heads, self.head_dim))  # a_dst (H, d_h)
        nn.init.xavier_uniform_(self.attn_src)
        nn.init.xavier_uniform_(self.attn_dst)
        self.leaky_relu = nn.LeakyReLU(negative_slope)

    def forward(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        wh = self.proj(h).view(-1, self.num_heads, self.head_dim)  # (N, H, d_h)
        with g.local_scope():
            g.srcdata["el"] = (wh * self.attn_src).sum(-1, keepdim=True)  # (N, H, 1) a_src·Wh_j
            g.dstdata["er"] = (wh * self.attn_dst).sum(-1, keepdim=True)  # (N, H, 1) a_dst·Wh_i
            g.apply_edges(fn.u_add_v("el", "er", "e"))  # (E, H, 1)
            scores = self.leaky_relu(g.edata["e"])
        return self.aggregate(g, scores, wh)

    def forward_dense(self, h: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        b, n, _ = h.shape
        wh = self.proj(h).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, n, d_h)
        src = (wh * self.attn_src[:, None]).sum(-1)  # (B, H, n) a_src·Wh_j
        dst = (wh * self.attn_dst[:, None]).sum(-1)  # (B, H, n) a_dst·Wh_i
        scores = self.leaky_relu(dst[..., :, None] + src[..., None, :])  # (B, H, n_i, n_j)
        return self.aggregate_dense(scores, wh, dg)


class DotProductAttention(_MultiHeadAttention):
    """Scaled dot-product attention as message passing (Vaswani et al., 2017):

        a_ij = softmax_{j∈N(i)} (W_Q h_i · W_K h_j / sqrt(d_h)),   h_i' = O · ‖_heads Σ_j a_ij W_V h_j

    On the complete graph this is exactly multi-head self-attention; on any other graph it is
    attention masked to the graph's edges.
    """

    def __init__(self, dim: int, num_heads: int = 4, attn_dropout: float = 0.0, scaled: bool = True):
        super().__init__(dim, num_heads, attn_dropout)
        self.query, self.key, self.value = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.scale = 1.0 / math.sqrt(self.head_dim) if scaled else 1.0

    def forward(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        shape = (-1, self.num_heads, self.head_dim)
        q, k, v = self.query(h).view(shape), self.key(h).view(shape), self.value(h).view(shape)  # (N, H, d_h)
        with g.local_scope():
            g.srcdata["k"], g.dstdata["q"] = k, q * self.scale
            g.apply_edges(fn.u_dot_v("k", "q", "score"))  # (E, H, 1) k_j · q_i / sqrt(d_h) on edge j -> i
            scores = g.edata["score"]
        return self.aggregate(g, scores, v)

    def forward_dense(self, h: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        """The same attention as one fused ``scaled_dot_product_attention`` call: with no mask at
        all on complete graphs of equal length, masked by the adjacency otherwise."""
        b, n, _ = h.shape

        def heads(x):  # (B, n, d) -> (B, H, n, d_h)
            return x.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

        q, k, v = heads(self.query(h)), heads(self.key(h)), heads(self.value(h))
        if self.record_attention:  # the explicit form, to keep the weights
            return self.aggregate_dense((q @ k.transpose(-1, -2)) * self.scale, v, dg)
        mask = None if dg.unmasked() else dg.mask()[:, None]  # (B, 1, n, n)
        dropout = self.attn_dropout.p if self.training else 0.0
        agg = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, scale=self.scale)
        agg = self._mask_heads(agg, 1).transpose(1, 2).flatten(2)  # (B, n, d)
        return self.out(agg if dg.adj is None else agg * dg.has_incoming())


class PoolAggregation(nn.Module):
    """Attention-free aggregation with a fixed reduction (GraphSAGE / GIN style):

        sum   h_i' = W · Σ_{j∈N(i)} h_j          (GIN, Xu et al., 2019: as expressive as 1-WL)
        mean  h_i' = W · mean_{j∈N(i)} h_j       (GraphSAGE-mean, Hamilton et al., 2017)
        max   h_i' = W · max_{j∈N(i)} h_j        (element-wise, GraphSAGE-pool)

    No scores, no softmax, no heads: every neighbour counts the same, whatever its content.
    A node with no incoming edge gets ``W · 0`` (DGL's convention for empty reductions).
    """

    REDUCERS = {"sum": fn.sum, "mean": fn.mean, "max": fn.max}

    def __init__(self, dim: int, num_heads: int = 1, attn_dropout: float = 0.0, reduce: str = "sum"):
        super().__init__()
        if reduce not in self.REDUCERS:
            raise ValueError(f"unknown reduction {reduce!r}; valid: {', '.join(self.REDUCERS)}")
        self.reduce, self.linear = reduce, nn.Linear(dim, dim)
        self.last_attention, self.num_heads = None, 0

    def forward(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        with g.local_scope():
            g.ndata["h"] = h
            g.update_all(fn.copy_u("h", "m"), self.REDUCERS[self.reduce]("m", "agg"))  # (N, d)
            return self.linear(g.ndata["agg"])

    def forward_dense(self, h: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        adj = dg.adjacency()  # (B, n, n) adj[b, i, j]: an edge j -> i
        if self.reduce == "max":  # (B, n, n, d) at once: fine at sentence lengths
            msgs = h[:, None, :, :].masked_fill(~adj[..., None], float("-inf")).amax(2)  # (B, n, d)
            agg = msgs.masked_fill(~dg.has_incoming().bool(), 0.0)
        else:
            a = adj.to(h.dtype)
            agg = a @ h  # (B, n, d)
            if self.reduce == "mean":
                agg = agg / a.sum(-1, keepdim=True).clamp(min=1)
        return self.linear(agg)


def _pool(reduce: str):
    def make(dim: int, num_heads: int = 1, attn_dropout: float = 0.0) -> PoolAggregation:
        return PoolAggregation(dim, num_heads, attn_dropout, reduce=reduce)

    return make


AGGREGATORS = {
    "gcn": GCNAggregation,
    "gat": GATAttention,
    "transformer": DotProductAttention,
    "sum": _pool("sum"),
    "mean": _pool("mean"),
    "max": _pool("max"),
}
