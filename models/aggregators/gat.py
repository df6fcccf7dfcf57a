"""GAT's aggregator: learned additive attention (Veličković et al., 2018).

    h_i' = O · ‖_heads Σ_{j∈N(i)} a_ij W h_j,    a_ij = softmax_j LeakyReLU(a_dst · W h_i + a_src · W h_j)

The Transformer's equation (``transformer.py``) with another score: a learned vector per head reads
the receiver and the sender separately and the two halves are added, where the Transformer takes a
dot product of the two. Unlike the original GAT the heads are mixed by an output projection O, as in
the Transformer, so the two aggregators differ only in their score function. The sparse path:

    s_ij = a_dst · W h_i + a_src · W h_j     g.apply_edges(fn.u_add_v("el", "er", "e"))   one score per edge
    a_ij = softmax_j LeakyReLU(s_ij)         edge_softmax(g, ...)
    h_i  = Σ_j a_ij W h_j                    g.update_all(fn.u_mul_e("v", "a", "m"), fn.sum("m", "h"))

The dense path is the same lines on a padded batch (B, H, n, n), non-edges at -inf before the softmax.

Hooks (``attention.py``; each a no-op when off): ``record`` (``record_attention``), ``masked_heads``
(``head_mask``), and with ``edge_types`` a per-type, per-head score b_t added before the LeakyReLU
(``typed_scores``, below) and the value vectors r^V_t (``typed_values``).
"""

from __future__ import annotations

import dgl
import dgl.function as fn
import torch
from dgl.nn.functional import edge_softmax
from torch import nn

from models.aggregators.attention import MultiHeadAttention
from models.dense import DenseGraph


class GATAttention(MultiHeadAttention):
    """a_ij = softmax_{j∈N(i)} LeakyReLU(a_dst·Wh_i + a_src·Wh_j),   h_i' = O · ‖_heads Σ_j a_ij W h_j."""

    def __init__(
        self, dim: int, num_heads: int = 4, attn_dropout: float = 0.0, negative_slope: float = 0.2, edge_types: int = 0
    ):
        super().__init__(dim, num_heads, attn_dropout, edge_types)
        self.proj = nn.Linear(dim, dim, bias=False)  # W
        self.rel_score = nn.Parameter(torch.zeros(edge_types, num_heads)) if edge_types else None  # b_t per head
        self.attn_src = nn.Parameter(torch.empty(num_heads, self.head_dim))  # a_src (H, d_h)
        self.attn_dst = nn.Parameter(torch.empty(num_heads, self.head_dim))  # a_dst (H, d_h)
        nn.init.xavier_uniform_(self.attn_src)
        nn.init.xavier_uniform_(self.attn_dst)
        self.leaky_relu = nn.LeakyReLU(negative_slope)

    def forward(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        """Message passing on ``g``: ``h`` (N, d) -> (N, d)."""
        # W h_j, split into H heads                                                 (N, H, d_h)
        wh = self.heads(self.proj(h))
        with g.local_scope():
            g.srcdata["el"] = (wh * self.attn_src).sum(-1, keepdim=True)  # (N, H, 1) a_src·Wh_j
            g.dstdata["er"] = (wh * self.attn_dst).sum(-1, keepdim=True)  # (N, H, 1) a_dst·Wh_i
            g.srcdata["v"] = wh
            # s_ij = a_dst · W h_i + a_src · W h_j                                 (E, H, 1), edge j -> i
            g.apply_edges(fn.u_add_v("el", "er", "e"))
            s = self.typed_scores(g, g.edata["e"])  # hook: + b_type(ij)
            # a_ij = softmax_{j∈N(i)} LeakyReLU(s_ij)                               (E, H, 1)
            a = edge_softmax(g, self.leaky_relu(s))
            self.record(a.squeeze(-1))  # hook: (E, H)
            g.edata["a"] = self.attn_dropout(a)
            # h_i = Σ_{j∈N(i)} a_ij W h_j                                           (N, H, d_h)
            g.update_all(fn.u_mul_e("v", "a", "m"), fn.sum("m", "h"))
            h = self.typed_values(g, g.dstdata["h"])  # hook: + Σ_j a_ij r^V_t
            # h_i' = O · ‖_heads h_i                                                (N, d)
            return self.out(self.masked_heads(h).flatten(1))

    def forward_dense(self, h: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        """The same lines on a padded batch: ``h`` (B, n, d) -> (B, n, d)."""
        # W h_j, split into H heads                                                 (B, H, n, d_h)
        wh = self.heads_dense(self.proj(h))
        src = (wh * self.attn_src[:, None]).sum(-1)  # (B, H, n) a_src·Wh_j
        dst = (wh * self.attn_dst[:, None]).sum(-1)  # (B, H, n) a_dst·Wh_i
        # s_ij = a_dst · W h_i + a_src · W h_j                                     (B, H, n_i, n_j)
        s = self.typed_scores_dense(dst[..., :, None] + src[..., None, :], dg)  # hook: + b_type(ij)
        # a_ij = softmax_{j∈N(i)} LeakyReLU(s_ij): row i's softmax, non-edges at -inf   (B, H, n, n)
        a = torch.softmax(self.leaky_relu(s).masked_fill(~dg.mask()[:, None], float("-inf")), dim=-1)
        self.record(a)  # hook: row i = what node i attends to
        a = self.attn_dropout(a)
        # h_i = Σ_{j∈N(i)} a_ij W h_j                                               (B, H, n, d_h)
        h = self.typed_values_dense(a @ wh, a, dg)  # hook: + Σ_j a_ij r^V_t
        # h_i' = O · ‖_heads h_i, O(0) at a node with no incoming edge, as in sparse   (B, n, d)
        return self.out(self.masked_heads(h).transpose(1, 2).flatten(2) * dg.has_incoming())

    # ---- hook: edge types on the scores ----
    def typed_scores(self, g: dgl.DGLGraph, s: torch.Tensor) -> torch.Tensor:
        """s_ij + b_type(ij) per head, (E, H, 1); ``s`` without edge types."""
        if not self.edge_types:
            return s
        return s + self.rel_score[g.edata["etype"]].unsqueeze(-1)

    def typed_scores_dense(self, s: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        """s_ij + b_type(ij) per head, (B, H, n, n); ``s`` without edge types."""
        if not self.edge_types:
            return s
        return s + self.rel_score[dg.etype].permute(0, 3, 1, 2)  # (B, n, n, H) -> (B, H, n, n)
