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
(tests/models/test_aggregators.py checks it against ``torch.nn.functional.scaled_dot_product_attention``).

Each aggregator also has ``forward_dense(h, dg)``: the same equation, with the same parameters, on
a padded batch ``(B, n, d)`` and its adjacency mask (``models/dense.py``). Messages become matrix
products, the fast path on dense hardware; tests/models/test_dense.py checks the two agree.

**Messages that know where they come from** (``edge_types=T``, ``model.edge_types=true``): every
edge carries a type (``data/graphs.py``: self, from a child, from the head, from the left, from
the right, ``<cls>``), and each aggregator reads it in the way that fits it:

  GCN, sum, mean, max   one channel per type, then one weight per type (R-GCN, Schlichtkrull et
                        al., 2018):  h_i' = Σ_t W_t · Agg_{j∈N_t(i)} h_j
  Transformer           type vectors added to keys and values (Shaw et al., 2018):
                        a_ij ∝ exp(q_i·(k_j + r^K_t)/sqrt(d_h)),  h_i' = O Σ_j a_ij (v_j + r^V_t)
  GAT                   a per-type, per-head score bias and the same value vectors r^V_t

so a node can tell its children's sum from its head's message: with ``sum`` that is a GIN update
that counts children and knows direction.
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


def _type_onehot(etype: torch.Tensor, num_types: int, dtype) -> torch.Tensor:
    """(..., T) float one-hot of edge types."""
    return F.one_hot(etype, num_types).to(dtype)


def _typed_linear_sum(
    g: dgl.DGLGraph, x: torch.Tensor, linear: nn.Linear, num_types: int, edge_weight: torch.Tensor | None = None
) -> torch.Tensor:
    """Σ_t W_t · Σ_{j∈N_t(i)} w_ji x_j (no bias), with W_t the t-th (d, d) block of ``linear``'s (d, T d) weight.

    The same as ``linear`` applied to T per-type channels of sums (R-GCN's form; the dense twins
    compute it that way), but each node is projected once per type and an edge carries one (d,)
    message, not T of them."""
    d_out = linear.weight.shape[0]
    per_type = torch.einsum("ni,oti->nto", x, linear.weight.view(d_out, num_types, -1))  # (N, T, d) W_t x_j
    src, _ = g.edges()
    with g.local_scope():
        msg = per_type[src, g.edata["etype"]]  # (E, d) W_type(e) x_src
        g.edata["m"] = msg if edge_weight is None else msg * edge_weight.unsqueeze(-1)
        g.update_all(fn.copy_e("m", "m"), fn.sum("m", "agg"))
        return g.dstdata["agg"]


def _typed_adjacency(dg: DenseGraph, num_types: int, dtype) -> torch.Tensor:
    """(B, T, n, n): the adjacency split by edge type."""
    onehot = _type_onehot(dg.etype, num_types, dtype)  # (B, n, n, T)
    return onehot.permute(0, 3, 1, 2) * dg.adjacency().unsqueeze(1).to(dtype)


class GCNAggregation(nn.Module):
    """Symmetric degree-normalised sum (Kipf & Welling, 2017): every neighbour weighs
    ``1 / sqrt(deg_in(i) · deg_out(j))``, fixed by the graph, no attention. ``num_heads`` is unused.
    With ``edge_types`` the normalised sum is taken per type, each with its own weight."""

    def __init__(self, dim: int, num_heads: int = 1, attn_dropout: float = 0.0, edge_types: int = 0):
        super().__init__()
        self.edge_types = edge_types
        self.linear = nn.Linear(dim * max(1, edge_types), dim)
        self.last_attention = None  # GCN has no attention to record
        self.num_heads = 0

    def forward(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        with g.local_scope():
            out_norm = g.out_degrees().clamp(min=1).float().pow(-0.5).unsqueeze(-1)  # (N, 1)
            in_norm = g.in_degrees().clamp(min=1).float().pow(-0.5).unsqueeze(-1)  # (N, 1)
            if self.edge_types:  # per type: in_norm · Σ_t W_t Σ_{j∈N_t} h_j out_norm_j, + b
                typed = _typed_linear_sum(g, h * out_norm, self.linear, self.edge_types)
                return typed * in_norm + self.linear.bias
            g.ndata["h"] = self.linear(h) * out_norm  # (N, d) W h_j / sqrt(deg_out(j))
            g.update_all(fn.copy_u("h", "m"), fn.sum("m", "h"))  # Σ_j over incoming edges
            return g.ndata["h"] * in_norm  # (N, d)

    def forward_dense(self, h: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        a = dg.adjacency().float()  # (B, n, n) a[b, i, j] = 1 for an edge j -> i
        in_norm = a.sum(-1).clamp(min=1).pow(-0.5).unsqueeze(-1)  # (B, n, 1)
        out_norm = a.sum(-2).clamp(min=1).pow(-0.5).unsqueeze(-1)  # (B, n, 1)
        if self.edge_types:
            typed = _typed_adjacency(dg, self.edge_types, h.dtype) @ (h * out_norm).unsqueeze(1)  # (B, T, n, d)
            return self.linear((typed * in_norm.unsqueeze(1)).transpose(1, 2).flatten(2))  # (B, n, d)
        return in_norm * (a @ (self.linear(h) * out_norm))  # (B, n, d)


class _MultiHeadAttention(nn.Module):
    """Shared by GAT and the Transformer: scores per edge -> edge_softmax -> weighted sum -> O."""

    splits_heads = True  # each head reads hidden_dim / num_heads units: num_heads must divide hidden_dim

    def __init__(self, dim: int, num_heads: int, attn_dropout: float = 0.0, edge_types: int = 0):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"model.hidden_dim={dim} must be divisible by model.num_heads={num_heads}")
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.edge_types = edge_types
        # r^V_t: what a message of type t adds to its value, per head (T, H, d_h); zero at first
        self.rel_value = nn.Parameter(torch.zeros(edge_types, num_heads, self.head_dim)) if edge_types else None
        self.out = nn.Linear(dim, dim)  # O: mixes the concatenated heads
        self.attn_dropout = nn.Dropout(attn_dropout)
        self.record_attention = False  # set True to keep the weights (E, H) in last_attention
        self.last_attention = None
        self.head_mask = None  # (H,) 0/1 per head: 0 silences a head (studies/prune_heads); None keeps all

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
            agg = g.dstdata["agg"]
            if self.edge_types:  # + Σ_j a_ij r^V_type(ij)
                g.edata["rv"] = g.edata["a"] * self.rel_value[g.edata["etype"]]  # (E, H, d_h)
                g.update_all(fn.copy_e("rv", "m"), fn.sum("m", "rel"))
                agg = agg + g.dstdata["rel"]
            return self.out(self._mask_heads(agg, 1).flatten(1))  # (N, d)

    def aggregate_dense(self, scores: torch.Tensor, values: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        """``scores`` (B, H, n, n) for every pair, ``values`` (B, H, n, d_h) -> (B, n, d)."""
        a = torch.softmax(scores.masked_fill(~dg.mask()[:, None], float("-inf")), dim=-1)  # (B, H, n, n)
        if self.record_attention:
            self.last_attention = a.detach()  # dense: (B, H, n, n), row i = what node i attends to
        a = self.attn_dropout(a)
        agg = a @ values  # (B, H, n, d_h)
        if self.edge_types:  # attention mass per type (B, H, n, T), times r^V_t
            mass = torch.einsum("bhij,bijt->bhit", a, _type_onehot(dg.etype, self.edge_types, a.dtype))
            agg = agg + torch.einsum("bhit,thd->bhid", mass, self.rel_value)
        agg = self._mask_heads(agg, 1).transpose(1, 2).flatten(2)  # (B, n, d)
        return self.out(agg * dg.has_incoming())  # a node with no incoming edge gets O(0), as in sparse

    def _gather_types(self, per_type: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        """(B, H, n, T) per receiving node and type -> (B, H, n, n) per pair, by the pair's type."""
        index = dg.etype.unsqueeze(1).expand(-1, per_type.shape[1], -1, -1)  # (B, H, n, n)
        return per_type.gather(-1, index)


class GATAttention(_MultiHeadAttention):
    """Additive attention (Veličković et al., 2018): ``a_ij = softmax_j LeakyReLU(a_dst·Wh_i + a_src·Wh_j)``.

    Unlike the original GAT the heads are mixed by an output projection O, as in the
    Transformer, so the two differ only in their score function.
    """

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
        wh = self.proj(h).view(-1, self.num_heads, self.head_dim)  # (N, H, d_h)
        with g.local_scope():
            g.srcdata["el"] = (wh * self.attn_src).sum(-1, keepdim=True)  # (N, H, 1) a_src·Wh_j
            g.dstdata["er"] = (wh * self.attn_dst).sum(-1, keepdim=True)  # (N, H, 1) a_dst·Wh_i
            g.apply_edges(fn.u_add_v("el", "er", "e"))  # (E, H, 1)
            e = g.edata["e"]
            if self.edge_types:
                e = e + self.rel_score[g.edata["etype"]].unsqueeze(-1)  # + b_type(ij)
            scores = self.leaky_relu(e)
        return self.aggregate(g, scores, wh)

    def forward_dense(self, h: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        b, n, _ = h.shape
        wh = self.proj(h).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, n, d_h)
        src = (wh * self.attn_src[:, None]).sum(-1)  # (B, H, n) a_src·Wh_j
        dst = (wh * self.attn_dst[:, None]).sum(-1)  # (B, H, n) a_dst·Wh_i
        e = dst[..., :, None] + src[..., None, :]  # (B, H, n_i, n_j)
        if self.edge_types:
            e = e + self.rel_score[dg.etype].permute(0, 3, 1, 2)  # (B, n, n, H) -> (B, H, n, n)
        return self.aggregate_dense(self.leaky_relu(e), wh, dg)


class DotProductAttention(_MultiHeadAttention):
    """Scaled dot-product attention as message passing (Vaswani et al., 2017):

        a_ij = softmax_{j∈N(i)} (W_Q h_i · W_K h_j / sqrt(d_h)),   h_i' = O · ‖_heads Σ_j a_ij W_V h_j

    On the complete graph this is exactly multi-head self-attention; on any other graph it is
    attention masked to the graph's edges. ``bias`` (optional): a score added to every edge's logit
    before the softmax, (E, H) sparse or (B, H, n, n) dense (``models/minilm.py``'s structure bias).
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
        shape = (-1, self.num_heads, self.head_dim)
        q, k, v = self.query(h).view(shape), self.key(h).view(shape), self.value(h).view(shape)  # (N, H, d_h)
        with g.local_scope():
            g.srcdata["k"], g.dstdata["q"] = k, q * self.scale
            g.apply_edges(fn.u_dot_v("k", "q", "score"))  # (E, H, 1) k_j · q_i / sqrt(d_h) on edge j -> i
            scores = g.edata["score"]
            if self.edge_types:  # + r^K_type(ij) · q_i / sqrt(d_h)
                g.edata["rk"] = self.rel_key[g.edata["etype"]]  # (E, H, d_h)
                g.apply_edges(fn.e_dot_v("rk", "q", "rel"))
                scores = scores + g.edata["rel"]
        if bias is not None:  # (E, H): + b_ij per head
            scores = scores + bias.unsqueeze(-1)
        return self.aggregate(g, scores, v)

    def forward_dense(self, h: torch.Tensor, dg: DenseGraph, bias: torch.Tensor | None = None) -> torch.Tensor:
        """The same attention as one fused ``scaled_dot_product_attention`` call: with no mask at
        all on complete graphs of equal length, masked by the adjacency otherwise."""
        b, n, _ = h.shape

        def heads(x):  # (B, n, d) -> (B, H, n, d_h)
            return x.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

        q, k, v = heads(self.query(h)), heads(self.key(h)), heads(self.value(h))
        if self.edge_types:  # scores + q_i · r^K_type(ij), then the explicit form (for the value vectors)
            rel = self._gather_types(torch.einsum("bhid,thd->bhit", q, self.rel_key), dg)  # (B, H, n, n)
            scores = (q @ k.transpose(-1, -2) + rel) * self.scale
            return self.aggregate_dense(scores if bias is None else scores + bias, v, dg)
        if self.record_attention:  # the explicit form, to keep the weights
            scores = (q @ k.transpose(-1, -2)) * self.scale
            return self.aggregate_dense(scores if bias is None else scores + bias, v, dg)
        mask = None if dg.unmasked() else dg.mask()[:, None]  # (B, 1, n, n)
        if bias is not None:  # an additive float mask: the bias on the edges, -inf off them
            mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
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
    With ``edge_types`` the reduction runs per type, each with its own W (R-GCN style); a type
    with no edge at a node contributes 0.
    """

    REDUCERS = {"sum": fn.sum, "mean": fn.mean, "max": fn.max}

    def __init__(
        self, dim: int, num_heads: int = 1, attn_dropout: float = 0.0, reduce: str = "sum", edge_types: int = 0
    ):
        super().__init__()
        if reduce not in self.REDUCERS:
            raise ValueError(f"unknown reduction {reduce!r}; valid: {', '.join(self.REDUCERS)}")
        self.reduce, self.edge_types = reduce, edge_types
        self.linear = nn.Linear(dim * max(1, edge_types), dim)
        self.last_attention, self.num_heads = None, 0

    def forward(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        if self.edge_types and self.reduce != "max":  # Σ_t W_t Agg_t, projected per type first (linear)
            weight = None
            if self.reduce == "mean":  # each message weighs 1 / (its receiver's in-edges of its type)
                src, dst = g.edges()
                count = h.new_zeros(g.num_nodes(), self.edge_types)
                count.index_put_((dst, g.edata["etype"]), torch.ones_like(dst, dtype=h.dtype), accumulate=True)
                weight = 1.0 / count[dst, g.edata["etype"]]
            return _typed_linear_sum(g, h, self.linear, self.edge_types, weight) + self.linear.bias
        if self.edge_types:
            return self.linear(self._typed(g, h).flatten(1))  # (N, T d) -> (N, d)
        with g.local_scope():
            g.ndata["h"] = h
            g.update_all(fn.copy_u("h", "m"), self.REDUCERS[self.reduce]("m", "agg"))  # (N, d)
            return self.linear(g.ndata["agg"])

    def _typed(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        """(N, T, d): the max over each type's in-edges."""
        with g.local_scope():  # max: messages of other types are pushed to -inf, empty types set to 0
            g.srcdata["h"] = h.unsqueeze(1)  # (N, 1, d)
            onehot = _type_onehot(g.edata["etype"], self.edge_types, h.dtype)
            g.edata["off"] = torch.where(onehot > 0, 0.0, float("-inf")).unsqueeze(-1)  # (E, T, 1)
            g.update_all(fn.u_add_e("h", "off", "m"), fn.max("m", "agg"))  # (N, T, d)
            agg = g.dstdata["agg"]
            return torch.where(torch.isfinite(agg), agg, torch.zeros_like(agg))

    def forward_dense(self, h: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        adj = dg.adjacency()  # (B, n, n) adj[b, i, j]: an edge j -> i
        if self.edge_types:
            typed = [self._reduce_dense(h, adj & (dg.etype == t)) for t in range(self.edge_types)]
            return self.linear(torch.cat(typed, -1))  # (B, n, T d) -> (B, n, d)
        return self.linear(self._reduce_dense(h, adj))

    def _reduce_dense(self, h: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        """(B, n, d): the reduction over the edges of ``adj`` (B, n, n); 0 at a node with none."""
        if self.reduce == "max":  # (B, n, n, d) at once: fine at sentence lengths
            msgs = h[:, None, :, :].masked_fill(~adj[..., None], float("-inf")).amax(2)  # (B, n, d)
            return msgs.masked_fill(~adj.any(-1, keepdim=True), 0.0)
        a = adj.to(h.dtype)
        agg = a @ h  # (B, n, d)
        return agg / a.sum(-1, keepdim=True).clamp(min=1) if self.reduce == "mean" else agg


def _pool(reduce: str):
    def make(dim: int, num_heads: int = 1, attn_dropout: float = 0.0, edge_types: int = 0) -> PoolAggregation:
        return PoolAggregation(dim, num_heads, attn_dropout, reduce=reduce, edge_types=edge_types)

    return make


DEFAULT_AGGREGATOR = "transformer"  # GraphEncoder's when none is named (the YAML always names one)
AGGREGATORS = {
    "gcn": GCNAggregation,
    "gin": _pool("sum"),  # GIN's sum; the block's feed-forward is its MLP (conf/model/gin.yaml: typed, gated, tied)
    "gat": GATAttention,
    "transformer": DotProductAttention,
    "sum": _pool("sum"),
    "mean": _pool("mean"),
    "max": _pool("max"),
}
