"""The one thing that changes between GCN, GAT and the Transformer: how a node weighs its neighbours.

Every aggregator maps node features ``h`` (N, d) on a graph ``g`` to messages summed at each
node, ``(N, d)``. With ``N(i)`` the nodes that send to i (edges ``j -> i``):

  GCN          h_i' = W · Σ_{j∈N(i)} h_j / sqrt(deg(i) · deg(j))          fixed weights          gcn.py
  GAT          h_i' = O · ‖_heads Σ_{j∈N(i)} a_ij W h_j,                                           gat.py
               a_ij = softmax_j LeakyReLU(a_dst·W h_i + a_src·W h_j)      learned, additive
  Transformer  h_i' = O · ‖_heads Σ_{j∈N(i)} a_ij W_V h_j,                                         transformer.py
               a_ij = softmax_j (W_Q h_i · W_K h_j / sqrt(d_h))          learned, dot product
  sum, mean,   h_i' = W · Agg_{j∈N(i)} h_j                                 every neighbour alike  pooling.py
  max, GIN                                                                                         gin.py

One module per aggregator, each with its equation written above the lines that compute it, in DGL
message passing (``forward(g, h)``: ``fn.u_dot_v``, ``edge_softmax``, ``fn.u_mul_e`` + ``fn.sum``) and
side by side on a padded batch ``(B, n, d)`` with its adjacency mask (``forward_dense(h, dg)``,
``models/dense.py``): the same equation with the same parameters, as matrix products.
tests/models/test_dense.py checks the two agree; on the complete graph the Transformer's aggregator
*is* multi-head self-attention (tests/models/test_aggregators.py checks it against
``torch.nn.functional.scaled_dot_product_attention``).

What is not the equation is a hook the equation calls: ``attention.py`` (recorded attention, head
masks, a structural bias, typed values: shared by GAT and the Transformer) and ``edge_types.py``
(messages that know where they come from: R-GCN weights per type for GCN and the reductions).

``AGGREGATORS`` maps each ``model.name`` of the encoder family to a class or factory taking
``(dim, num_heads=, attn_dropout=, edge_types=)`` (and ``scaled=`` for dot-product attention).
"""

from __future__ import annotations

from models.aggregators.attention import MultiHeadAttention
from models.aggregators.gat import GATAttention
from models.aggregators.gcn import GCNAggregation
from models.aggregators.gin import gin
from models.aggregators.pooling import PoolAggregation, pool
from models.aggregators.transformer import DotProductAttention

DEFAULT_AGGREGATOR = "transformer"  # GraphEncoder's when none is named (the YAML always names one)
AGGREGATORS = {
    "gcn": GCNAggregation,
    "gin": gin,  # GIN's sum; the block's feed-forward is its MLP (conf/model/gin.yaml: typed, gated, tied)
    "gat": GATAttention,
    "transformer": DotProductAttention,
    "sum": pool("sum"),
    "mean": pool("mean"),
    "max": pool("max"),
}

__all__ = [
    "AGGREGATORS",
    "DEFAULT_AGGREGATOR",
    "DotProductAttention",
    "GATAttention",
    "GCNAggregation",
    "MultiHeadAttention",
    "PoolAggregation",
]
