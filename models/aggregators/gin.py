"""GIN's aggregator (Xu et al., 2019): the sum of ``pooling.py``, with the block around it as GIN's update.

GIN updates a node by an MLP of its own state plus the sum of its neighbours':

    h_i' = MLP((1 + ε) h_i + Σ_{j∈N(i)} h_j)

Here the aggregator is the sum alone, W Σ_{j∈N(i)} h_j + b, and ``models/encoder.py``'s ``Block``
supplies the rest: its residual adds h_i (ε = 0), its feed-forward is the MLP. An injective
sum is what makes GIN as expressive as the 1-WL test; a mean or a max forgets how many neighbours
sent the same message (tests/models/test_pooling_and_heads.py). conf/model/gin.yaml runs it on typed
edges (R-GCN channels, ``edge_types.py``), with a GRU update and one block iterated: a node sums its
children's, its head's and its own messages separately.
"""

from __future__ import annotations

from models.aggregators.pooling import pool

gin = pool("sum")  # gin(dim, num_heads, attn_dropout, edge_types) -> PoolAggregation(reduce="sum")
