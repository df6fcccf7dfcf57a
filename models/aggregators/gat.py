"""GAT's aggregator: learned additive attention (Veličković et al., 2018).

    h_i' = O · ‖_heads Σ_{j∈N(i)} a_ij W h_j,    a_ij = softmax_j LeakyReLU(a_dst · W h_i + a_src · W h_j)

The Transformer's equation (``transformer.py``) with another score: a learned vector per head reads
the receiver and the sender separately and the two halves are added, where the Transformer takes a
dot product of the two. Unlike the original GAT the heads are mixed by an output projection O, as in
the Transformer, so the two aggregators differ only in their score function. The sparse path
(``forward``):

    s_ij = LeakyReLU(a_dst · W h_i + a_src · W h_j)     g.apply_edges(fn.u_add_v("el", "er", "e"))
    a_ij = softmax_{j∈N(i)} s_ij                        edge_softmax(g, s)
    h_i  = Σ_j a_ij W h_j                               g.update_all(fn.u_mul_e("v", "a", "m"), fn.sum("m", "h"))

In DGL an edge j -> i runs from u = j, its source (the sender), to v = i, its destination (the
receiver): ``u_add_v("el", "er", ...)`` adds the sender's half to the receiver's.

``forward_edges`` is the same lines in stock torch (``models/torch_mp.py``: gathers, a segment
softmax, ``index_add_``), for a GPU that DGL's graphs cannot reach.

The dense path (``forward_dense``) is the same lines on a padded batch (B, H, n, n), non-edges at
-inf before the softmax. With ``edge_types`` (``forward_typed``, ``forward_typed_dense``) the type t of
edge j -> i adds a score b_t per head before the LeakyReLU, and a vector r^V_t to the value:

    s_ij = LeakyReLU(a_dst · W h_i + a_src · W h_j + b_t),    h_i = Σ_j a_ij (W h_j + r^V_t)

Hooks (``attention.py``; each returns its input when off): ``record`` (``record_attention``),
``masked_heads`` (``head_mask``).
"""

from __future__ import annotations

import dgl
import dgl.function as fn
import torch
from dgl.nn.functional import edge_softmax
from torch import nn

# MultiHeadAttention: the heads (self.heads: (N, d) -> (N, H, d_h)), dropout on a_ij and the hooks
# record, masked_heads, typed_values
from models.aggregators.attention import MultiHeadAttention
from models.dense import DenseGraph
from models.torch_mp import EdgeGraph


class GATAttention(MultiHeadAttention):
    """a_ij = softmax_{j∈N(i)} LeakyReLU(a_dst·Wh_i + a_src·Wh_j),   h_i' = O · ‖_heads Σ_j a_ij W h_j."""

    def __init__(
        self, dim: int, num_heads: int = 4, attn_dropout: float = 0.0, negative_slope: float = 0.2, edge_types: int = 0
    ):
        super().__init__(dim, num_heads, attn_dropout, edge_types)  # r^V_t (with edge types)
        self.out = nn.Linear(dim, dim)  # O: mixes the concatenated heads
        self.proj = nn.Linear(dim, dim, bias=False)  # W
        self.rel_score = nn.Parameter(torch.zeros(edge_types, num_heads)) if edge_types else None  # b_t per head
        self.attn_src = nn.Parameter(torch.empty(num_heads, self.head_dim))  # a_src (H, d_h)
        self.attn_dst = nn.Parameter(torch.empty(num_heads, self.head_dim))  # a_dst (H, d_h)
        nn.init.xavier_uniform_(self.attn_src)
        nn.init.xavier_uniform_(self.attn_dst)
        self.leaky_relu = nn.LeakyReLU(negative_slope)

    def forward(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        """Message passing on ``g``: ``h`` (N, d) -> (N, d)."""
        if self.edge_types:
            return self.forward_typed(g, h)
        # W h_j, split into H heads                                                      (N, H, d_h)
        wh = self.heads(self.proj(h))
        with g.local_scope():
            g.srcdata["el"] = (wh * self.attn_src).sum(-1, keepdim=True)  # (N, H, 1) a_src · W h_j
            g.dstdata["er"] = (wh * self.attn_dst).sum(-1, keepdim=True)  # (N, H, 1) a_dst · W h_i
            g.srcdata["v"] = wh
            # s_ij = LeakyReLU(a_dst · W h_i + a_src · W h_j) on each edge j -> i              (E, H, 1)
            g.apply_edges(fn.u_add_v("el", "er", "e"))  # u: the edge's source j (sender), v: its destination i
            s = self.leaky_relu(g.edata["e"])
            # a_ij = softmax_{j∈N(i)} s_ij                                                     (E, H, 1)
            a = edge_softmax(g, s)
            a = self.record(a)  # hook: keeps a_ij
            g.edata["a"] = self.attn_dropout(a)
            # h_i = Σ_{j∈N(i)} a_ij W h_j                                                      (N, H, d_h)
            g.update_all(fn.u_mul_e("v", "a", "m"), fn.sum("m", "h"))
            h = self.masked_heads(g.dstdata["h"])  # hook: silences heads
            # h_i' = O · ‖_heads h_i                                                           (N, d)
            return self.out(h.flatten(1))

    def forward_edges(self, h: torch.Tensor, eg: EdgeGraph) -> torch.Tensor:
        """The same lines in stock torch, on the edges ``eg`` (``models/torch_mp.py``), with or without edge
        types (``forward_typed``'s b_t and r^V_t): ``h`` (N, d) -> (N, d)."""
        wh = self.heads(self.proj(h))  # (N, H, d_h) W h_j
        el = (wh * self.attn_src).sum(-1, keepdim=True)  # (N, H, 1) a_src · W h_j
        er = (wh * self.attn_dst).sum(-1, keepdim=True)  # (N, H, 1) a_dst · W h_i
        s = eg.src_of(el) + eg.dst_of(er)  # (E, H, 1) on each edge j -> i: the sender's half + the receiver's
        if self.edge_types:
            s = s + self.rel_score[eg.etype].unsqueeze(-1)  # + b_t
        # a_ij = softmax_{j∈N(i)} LeakyReLU(s_ij)                                           (E, H, 1)
        a = self.record(eg.softmax(self.leaky_relu(s)))  # hook: keeps a_ij
        a = self.attn_dropout(a)
        # h_i = Σ_{j∈N(i)} a_ij W h_j (+ Σ_j a_ij r^V_t)                                     (N, H, d_h)
        h = self.typed_values_edges(eg, eg.sum(a * eg.src_of(wh)), a)
        return self.out(self.masked_heads(h).flatten(1))  # h_i' = O · ‖_heads h_i

    def forward_dense(self, h: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        """The same lines on a padded batch: ``h`` (B, n, d) -> (B, n, d)."""
        if self.edge_types:
            return self.forward_typed_dense(h, dg)
        # W h_j, split into H heads                                                      (B, H, n, d_h)
        wh = self.heads_dense(self.proj(h))
        src = (wh * self.attn_src[:, None]).sum(-1)  # (B, H, n) a_src · W h_j
        dst = (wh * self.attn_dst[:, None]).sum(-1)  # (B, H, n) a_dst · W h_i
        # s_ij = LeakyReLU(a_dst · W h_i + a_src · W h_j)                                   (B, H, n_i, n_j)
        s = self.leaky_relu(dst[..., :, None] + src[..., None, :])
        # a_ij = softmax_{j∈N(i)} s_ij: row i's softmax, non-edges at -inf                 (B, H, n, n)
        a = torch.softmax(s.masked_fill(~dg.mask()[:, None], float("-inf")), dim=-1)
        a = self.record(a)  # hook: keeps a_ij, row i = what node i attends to
        a = self.attn_dropout(a)
        # h_i = Σ_{j∈N(i)} a_ij W h_j                                                        (B, H, n, d_h)
        h = self.masked_heads(a @ wh)  # hook: silences heads
        # h_i' = O · ‖_heads h_i, O(0) at a node with no incoming edge, as in sparse        (B, n, d)
        return self.out(h.transpose(1, 2).flatten(2) * dg.has_incoming())

    # ---- edge types: a score per type on each edge, a vector per type on each value ----
    def forward_typed(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        """``forward`` with the type t of each edge j -> i (``g.edata['etype']``):
        s_ij = LeakyReLU(a_dst · W h_i + a_src · W h_j + b_t),  h_i = Σ_j a_ij (W h_j + r^V_t)."""
        wh = self.heads(self.proj(h))  # (N, H, d_h)
        with g.local_scope():
            g.srcdata["el"] = (wh * self.attn_src).sum(-1, keepdim=True)  # (N, H, 1) a_src · W h_j
            g.dstdata["er"] = (wh * self.attn_dst).sum(-1, keepdim=True)  # (N, H, 1) a_dst · W h_i
            g.srcdata["v"] = wh
            g.apply_edges(fn.u_add_v("el", "er", "e"))  # u: the sender j, v: the receiver i
            s = self.leaky_relu(self.typed_scores(g, g.edata["e"]))  # (E, H, 1)
            a = self.record(edge_softmax(g, s))
            g.edata["a"] = self.attn_dropout(a)
            g.update_all(fn.u_mul_e("v", "a", "m"), fn.sum("m", "h"))
            h = self.typed_values(g, g.dstdata["h"])  # + Σ_j a_ij r^V_t                    (N, H, d_h)
            return self.out(self.masked_heads(h).flatten(1))

    def forward_typed_dense(self, h: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        """``forward_typed`` on a padded batch, the types in ``dg.etype`` (B, n, n)."""
        wh = self.heads_dense(self.proj(h))  # (B, H, n, d_h)
        src = (wh * self.attn_src[:, None]).sum(-1)  # (B, H, n) a_src · W h_j
        dst = (wh * self.attn_dst[:, None]).sum(-1)  # (B, H, n) a_dst · W h_i
        s = self.leaky_relu(self.typed_scores_dense(dst[..., :, None] + src[..., None, :], dg))  # (B, H, n, n)
        a = self.record(torch.softmax(s.masked_fill(~dg.mask()[:, None], float("-inf")), dim=-1))
        a = self.attn_dropout(a)
        h = self.typed_values_dense(a @ wh, a, dg)  # + Σ_j a_ij r^V_t                      (B, H, n, d_h)
        return self.out(self.masked_heads(h).transpose(1, 2).flatten(2) * dg.has_incoming())

    def typed_scores(self, g: dgl.DGLGraph, s: torch.Tensor) -> torch.Tensor:
        """s_ij + b_type(ij) per head, (E, H, 1); ``s`` itself without edge types."""
        if not self.edge_types:
            return s
        return s + self.rel_score[g.edata["etype"]].unsqueeze(-1)

    def typed_scores_dense(self, s: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        """s_ij + b_type(ij) per head, (B, H, n, n); ``s`` itself without edge types."""
        if not self.edge_types:
            return s
        return s + self.rel_score[dg.etype].permute(0, 3, 1, 2)  # (B, n, n, H) -> (B, H, n, n)
