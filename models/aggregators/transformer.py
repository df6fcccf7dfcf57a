"""The Transformer's aggregator: scaled dot-product attention as message passing (Vaswani et al., 2017).

    h_i' = O · ‖_heads Σ_{j∈N(i)} softmax_j(q_i · k_j / sqrt(d_h)) v_j,    q = W_Q h, k = W_K h, v = W_V h

On the complete graph this is multi-head self-attention exactly (tests/models/test_aggregators.py
checks it against ``scaled_dot_product_attention``); on any other graph it is attention masked to the
graph's edges. The sparse path (``forward``) is DGL's three steps, an SDDMM, a softmax over each
node's incoming edges, an SpMM:

    s_ij = q_i · k_j / sqrt(d_h)       g.apply_edges(fn.u_dot_v("k", "q", "s"))       one score per edge
    a_ij = softmax_{j∈N(i)} s_ij       edge_softmax(g, s)
    h_i  = Σ_{j∈N(i)} a_ij v_j         g.update_all(fn.u_mul_e("v", "a", "m"), fn.sum("m", "h"))

In DGL an edge j -> i runs from u = j, its source (the sender), to v = i, its destination (the
receiver): ``u_dot_v("k", "q", ...)`` is the sender's key dotted with the receiver's query.

``forward_edges`` is the same lines in stock torch (``models/torch_mp.py``: gathers, a segment
softmax, ``index_add_``), for a GPU that DGL's graphs cannot reach.

The dense path (``forward_dense``) is the same lines on a padded batch (B, H, n, n), non-edges at
-inf before the softmax; when no hook needs a_ij itself it runs as one fused
``scaled_dot_product_attention`` call (``fused_dense``). Shapes: N nodes, E edges, H heads of d_h
units, B graphs padded to n nodes.

With ``edge_types`` (``forward_typed``, ``forward_typed_dense``) the type t of edge j -> i adds a
vector to the key and one to the value (Shaw et al., 2018):

    a_ij ∝ exp(q_i · (k_j + r^K_t) / sqrt(d_h)),    h_i = Σ_j a_ij (v_j + r^V_t)

Hooks (``attention.py``; each returns its input when off): ``add_bias`` (``bias``: models/minilm.py's
structure bias b_ij), ``record`` (``record_attention``), ``masked_heads`` (``head_mask``).
"""

from __future__ import annotations

import math

import dgl
import dgl.function as fn
import torch
import torch.nn.functional as F
from dgl.nn.functional import edge_softmax
from torch import nn

# MultiHeadAttention: the heads (self.heads: (N, d) -> (N, H, d_h)), dropout on a_ij and the hooks
# record, masked_heads, typed_values; add_bias(s, bias): s_ij + b_ij, s itself when bias is None
from models.aggregators.attention import MultiHeadAttention, add_bias
from models.dense import DenseGraph
from models.torch_mp import EdgeGraph


class DotProductAttention(MultiHeadAttention):
    """a_ij = softmax_{j∈N(i)} (W_Q h_i · W_K h_j / sqrt(d_h)),   h_i' = O · ‖_heads Σ_j a_ij W_V h_j.

    ``scaled=False`` drops the 1 / sqrt(d_h). ``bias`` (optional, per call): a score added to every
    edge's logit before the softmax, (E, H) sparse or (B, H, n, n) dense.
    """

    def __init__(
        self, dim: int, num_heads: int = 4, attn_dropout: float = 0.0, scaled: bool = True, edge_types: int = 0
    ):
        super().__init__(dim, num_heads, attn_dropout, edge_types)  # r^V_t (with edge types)
        self.out = nn.Linear(dim, dim)  # O: mixes the concatenated heads
        self.query, self.key, self.value = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.scale = 1.0 / math.sqrt(self.head_dim) if scaled else 1.0
        # r^K_t: what a message of type t adds to its key, per head (T, H, d_h)
        self.rel_key = nn.Parameter(torch.randn(edge_types, num_heads, self.head_dim) * 0.02) if edge_types else None

    def forward(self, g: dgl.DGLGraph, h: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """Message passing on ``g``: ``h`` (N, d) -> (N, d)."""
        if self.edge_types:
            return self.forward_typed(g, h, bias)
        # q_i = W_Q h_i, k_j = W_K h_j, v_j = W_V h_j, each split into H heads          (N, H, d_h)
        q, k, v = self.heads(self.query(h)), self.heads(self.key(h)), self.heads(self.value(h))
        with g.local_scope():
            g.dstdata["q"], g.srcdata["k"], g.srcdata["v"] = q, k, v
            # s_ij = q_i · k_j / sqrt(d_h) on each edge j -> i                               (E, H, 1)
            g.apply_edges(fn.u_dot_v("k", "q", "qk"))  # u: the edge's source j (sender), v: its destination i
            s = g.edata["qk"] * self.scale
            s = add_bias(s, bias)  # hook: + b_ij
            # a_ij = softmax_{j∈N(i)} s_ij                                                     (E, H, 1)
            a = edge_softmax(g, s)
            a = self.record(a)  # hook: keeps a_ij
            g.edata["a"] = self.attn_dropout(a)
            # h_i = Σ_{j∈N(i)} a_ij v_j                                                        (N, H, d_h)
            g.update_all(fn.u_mul_e("v", "a", "m"), fn.sum("m", "h"))
            h = self.masked_heads(g.dstdata["h"])  # hook: silences heads
            # h_i' = O · ‖_heads h_i                                                           (N, d)
            return self.out(h.flatten(1))

    def forward_edges(self, h: torch.Tensor, eg: EdgeGraph, bias: torch.Tensor | None = None) -> torch.Tensor:
        """The same lines in stock torch, on the edges ``eg`` (``models/torch_mp.py``), with or without edge
        types (``forward_typed``'s r^K_t and r^V_t): ``h`` (N, d) -> (N, d)."""
        q, k, v = self.heads(self.query(h)), self.heads(self.key(h)), self.heads(self.value(h))  # (N, H, d_h)
        q_i = eg.dst_of(q)  # (E, H, d_h) the receiver's query on each edge j -> i
        # s_ij = q_i · (k_j + r^K_t) / sqrt(d_h)                                            (E, H, 1)
        qk = (q_i * eg.src_of(k)).sum(-1, keepdim=True)
        if self.edge_types:
            qk = qk + (q_i * self.rel_key[eg.etype]).sum(-1, keepdim=True)
        s = add_bias(qk * self.scale, bias)  # hook: + b_ij
        # a_ij = softmax_{j∈N(i)} s_ij                                                         (E, H, 1)
        a = self.record(eg.softmax(s))  # hook: keeps a_ij
        a = self.attn_dropout(a)
        # h_i = Σ_{j∈N(i)} a_ij (v_j + r^V_t)                                                  (N, H, d_h)
        h = self.typed_values_edges(eg, eg.sum(a * eg.src_of(v)), a)
        return self.out(self.masked_heads(h).flatten(1))  # h_i' = O · ‖_heads h_i

    def forward_dense(self, h: torch.Tensor, dg: DenseGraph, bias: torch.Tensor | None = None) -> torch.Tensor:
        """The same lines on a padded batch: ``h`` (B, n, d) -> (B, n, d)."""
        if self.edge_types:
            return self.forward_typed_dense(h, dg, bias)
        # q_i = W_Q h_i, k_j = W_K h_j, v_j = W_V h_j, each split into H heads          (B, H, n, d_h)
        q, k, v = self.heads_dense(self.query(h)), self.heads_dense(self.key(h)), self.heads_dense(self.value(h))
        if not self.needs_weights:  # nothing reads a_ij: one fused kernel computes the lines below
            return self.fused_dense(q, k, v, dg, bias)
        # s_ij = q_i · k_j / sqrt(d_h)                                                      (B, H, n, n)
        s = q @ k.transpose(-1, -2) * self.scale
        s = add_bias(s, bias)  # hook: + b_ij
        # a_ij = softmax_{j∈N(i)} s_ij: a softmax over row i with the non-edges at -inf     (B, H, n, n)
        a = torch.softmax(s.masked_fill(~dg.mask()[:, None], float("-inf")), dim=-1)
        a = self.record(a)  # hook: keeps a_ij, row i = what node i attends to
        a = self.attn_dropout(a)
        # h_i = Σ_{j∈N(i)} a_ij v_j                                                          (B, H, n, d_h)
        h = self.masked_heads(a @ v)  # hook: silences heads
        # h_i' = O · ‖_heads h_i, O(0) at a node with no incoming edge, as in sparse        (B, n, d)
        return self.out(h.transpose(1, 2).flatten(2) * dg.has_incoming())

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

    # ---- edge types on keys and values (Shaw et al., 2018) ----
    def forward_typed(self, g: dgl.DGLGraph, h: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """``forward`` with the type t of each edge j -> i (``g.edata['etype']``):
        s_ij = q_i · (k_j + r^K_t) / sqrt(d_h),  h_i = Σ_j a_ij (v_j + r^V_t)."""
        q, k, v = self.heads(self.query(h)), self.heads(self.key(h)), self.heads(self.value(h))  # (N, H, d_h)
        with g.local_scope():
            g.dstdata["q"], g.srcdata["k"], g.srcdata["v"] = q, k, v
            g.apply_edges(fn.u_dot_v("k", "q", "qk"))  # q_i · k_j; u: the sender j, v: the receiver i
            s = add_bias(self.typed_keys(g, g.edata["qk"]) * self.scale, bias)  # (E, H, 1)
            a = self.record(edge_softmax(g, s))
            g.edata["a"] = self.attn_dropout(a)
            g.update_all(fn.u_mul_e("v", "a", "m"), fn.sum("m", "h"))
            h = self.typed_values(g, g.dstdata["h"])  # + Σ_j a_ij r^V_t                    (N, H, d_h)
            return self.out(self.masked_heads(h).flatten(1))

    def forward_typed_dense(self, h: torch.Tensor, dg: DenseGraph, bias: torch.Tensor | None = None) -> torch.Tensor:
        """``forward_typed`` on a padded batch, the types in ``dg.etype`` (B, n, n)."""
        q, k, v = self.heads_dense(self.query(h)), self.heads_dense(self.key(h)), self.heads_dense(self.value(h))
        s = add_bias(self.typed_keys_dense(q @ k.transpose(-1, -2), q, dg) * self.scale, bias)  # (B, H, n, n)
        a = self.record(torch.softmax(s.masked_fill(~dg.mask()[:, None], float("-inf")), dim=-1))
        a = self.attn_dropout(a)
        h = self.typed_values_dense(a @ v, a, dg)  # + Σ_j a_ij r^V_t                       (B, H, n, d_h)
        return self.out(self.masked_heads(h).transpose(1, 2).flatten(2) * dg.has_incoming())

    def typed_keys(self, g: dgl.DGLGraph, qk: torch.Tensor) -> torch.Tensor:
        """q_i · k_j + q_i · r^K_type(ij), (E, H, 1), before the scaling, with q_i in ``g.dstdata['q']``;
        ``qk`` itself without edge types."""
        if not self.edge_types:
            return qk
        g.edata["rk"] = self.rel_key[g.edata["etype"]]  # (E, H, d_h)
        g.apply_edges(fn.e_dot_v("rk", "q", "rel"))
        return qk + g.edata["rel"]

    def typed_keys_dense(self, qk: torch.Tensor, q: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        """q_i · k_j + q_i · r^K_type(ij), (B, H, n, n), before the scaling; ``qk`` itself without edge types."""
        if not self.edge_types:
            return qk
        return qk + self.typed_per_pair(torch.einsum("bhid,thd->bhit", q, self.rel_key), dg)
