"""The Transformer's aggregator: scaled dot-product attention as message passing (Vaswani et al., 2017).

    h_i' = O · ‖_heads Σ_{j∈N(i)} softmax_j(q_i · k_j / sqrt(d_h)) v_j,    q = W_Q h, k = W_K h, v = W_V h

On the complete graph this is multi-head self-attention exactly (tests/models/test_aggregators.py
checks it against ``scaled_dot_product_attention``); on any other graph it is attention masked to the
graph's edges. The sparse path is DGL's three steps, an SDDMM, a softmax over each node's incoming
edges, an SpMM:

    s_ij = q_i · k_j / sqrt(d_h)       g.apply_edges(fn.u_dot_v("k", "q", "s"))       one score per edge
    a_ij = softmax_{j∈N(i)} s_ij       edge_softmax(g, s)
    h_i  = Σ_{j∈N(i)} a_ij v_j         g.update_all(fn.u_mul_e("v", "a", "m"), fn.sum("m", "h"))

The dense path is the same lines on a padded batch (B, H, n, n), non-edges at -inf before the
softmax; when no hook needs a_ij itself it runs as one fused ``scaled_dot_product_attention`` call.
Shapes: N nodes, E edges, H heads of d_h units, B graphs padded to n nodes.

Hooks (``attention.py``; each a no-op when off): ``add_bias`` (``bias``: models/minilm.py's
structure bias b_ij), ``record`` (``record_attention``), ``masked_heads`` (``head_mask``), and with
``edge_types`` the type vectors of Shaw et al. (2018), added to keys (``typed_keys``, below) and values
(``typed_values``): a_ij ∝ exp(q_i · (k_j + r^K_t) / sqrt(d_h)),  h_i = Σ_j a_ij (v_j + r^V_t).
"""

from __future__ import annotations

import math

import dgl
import dgl.function as fn
import torch
import torch.nn.functional as F
from dgl.nn.functional import edge_softmax
from torch import nn

from models.aggregators.attention import MultiHeadAttention, add_bias
from models.dense import DenseGraph


class DotProductAttention(MultiHeadAttention):
    """a_ij = softmax_{j∈N(i)} (W_Q h_i · W_K h_j / sqrt(d_h)),   h_i' = O · ‖_heads Σ_j a_ij W_V h_j.

    ``scaled=False`` drops the 1 / sqrt(d_h). ``bias`` (optional, per call): a score added to every
    edge's logit before the softmax, (E, H) sparse or (B, H, n, n) dense.
    """

    def __init__(
        self, dim: int, num_heads: int = 4, attn_dropout: float = 0.0, scaled: bool = True, edge_types: int = 0
    ):
        super().__init__(dim, num_heads, attn_dropout, edge_types)
        self.query, self.key, self.value = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.scale = 1.0 / math.sqrt(self.head_dim) if scaled else 1.0
        # r^K_t: what a message of type t adds to its key, per head (T, H, d_h)
        self.rel_key = nn.Parameter(torch.randn(edge_types, num_heads, self.head_dim) * 0.02) if edge_types else None

    def forward(self, g: dgl.DGLGraph, h: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """Message passing on ``g``: ``h`` (N, d) -> (N, d)."""
        # q_i = W_Q h_i, k_j = W_K h_j, v_j = W_V h_j, each split into H heads     (N, H, d_h)
        q, k, v = self.heads(self.query(h)), self.heads(self.key(h)), self.heads(self.value(h))
        with g.local_scope():
            g.dstdata["q"], g.srcdata["k"], g.srcdata["v"] = q * self.scale, k, v
            # s_ij = q_i · k_j / sqrt(d_h)                                         (E, H, 1), edge j -> i
            g.apply_edges(fn.u_dot_v("k", "q", "s"))
            s = add_bias(self.typed_keys(g, g.edata["s"]), bias)  # hooks: + q_i · r^K_t / sqrt(d_h), + b_ij
            # a_ij = softmax_{j∈N(i)} s_ij                                          (E, H, 1)
            a = edge_softmax(g, s)
            self.record(a.squeeze(-1))  # hook: (E, H)
            g.edata["a"] = self.attn_dropout(a)
            # h_i = Σ_{j∈N(i)} a_ij v_j                                             (N, H, d_h)
            g.update_all(fn.u_mul_e("v", "a", "m"), fn.sum("m", "h"))
            h = self.typed_values(g, g.dstdata["h"])  # hook: + Σ_j a_ij r^V_t
            # h_i' = O · ‖_heads h_i                                                (N, d)
            return self.out(self.masked_heads(h).flatten(1))

    def forward_dense(self, h: torch.Tensor, dg: DenseGraph, bias: torch.Tensor | None = None) -> torch.Tensor:
        """The same lines on a padded batch: ``h`` (B, n, d) -> (B, n, d)."""
        # q_i = W_Q h_i, k_j = W_K h_j, v_j = W_V h_j, each split into H heads     (B, H, n, d_h)
        q, k, v = self.heads_dense(self.query(h)), self.heads_dense(self.key(h)), self.heads_dense(self.value(h))
        if not self.needs_weights:  # nothing reads a_ij: one fused kernel computes the lines below
            return self.fused_dense(q, k, v, dg, bias)
        # s_ij = q_i · k_j / sqrt(d_h)                                             (B, H, n, n)
        s = add_bias(self.typed_keys_dense(q @ k.transpose(-1, -2), q, dg) * self.scale, bias)
        # a_ij = softmax_{j∈N(i)} s_ij: a softmax over row i with the non-edges at -inf   (B, H, n, n)
        a = torch.softmax(s.masked_fill(~dg.mask()[:, None], float("-inf")), dim=-1)
        self.record(a)  # hook: row i = what node i attends to
        a = self.attn_dropout(a)
        # h_i = Σ_{j∈N(i)} a_ij v_j                                                 (B, H, n, d_h)
        h = self.typed_values_dense(a @ v, a, dg)  # hook: + Σ_j a_ij r^V_t
        # h_i' = O · ‖_heads h_i, O(0) at a node with no incoming edge, as in sparse   (B, n, d)
        return self.out(self.masked_heads(h).transpose(1, 2).flatten(2) * dg.has_incoming())

    def fused_dense(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dg: DenseGraph, bias: torch.Tensor | None
    ) -> torch.Tensor:
        """``forward_dense`` as one ``scaled_dot_product_attention`` call: with no mask at all on complete
        graphs of equal length, masked by the adjacency otherwise; a bias joins the mask as its float form."""
        mask = None if dg.unmasked() else dg.mask()[:, None]  # (B, 1, n, n)
        if bias is not None:  # an additive float mask: the bias on the edges, -inf off them
            mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
        dropout = self.attn_dropout.p if self.training else 0.0
        h = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, scale=self.scale)
        h = self.masked_heads(h).transpose(1, 2).flatten(2)  # (B, n, d)
        return self.out(h if dg.adj is None else h * dg.has_incoming())

    # ---- hook: edge types on the keys (Shaw et al., 2018) ----
    def typed_keys(self, g: dgl.DGLGraph, s: torch.Tensor) -> torch.Tensor:
        """s_ij + q_i · r^K_type(ij) / sqrt(d_h), with the scaled q_i in ``g.dstdata['q']``; ``s`` without edge types."""
        if not self.edge_types:
            return s
        g.edata["rk"] = self.rel_key[g.edata["etype"]]  # (E, H, d_h)
        g.apply_edges(fn.e_dot_v("rk", "q", "rel"))
        return s + g.edata["rel"]

    def typed_keys_dense(self, qk: torch.Tensor, q: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        """q_i · k_j + q_i · r^K_type(ij), (B, H, n, n), before the scaling; ``qk`` without edge types."""
        if not self.edge_types:
            return qk
        return qk + self.typed_per_pair(torch.einsum("bhid,thd->bhit", q, self.rel_key), dg)
