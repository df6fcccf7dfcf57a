"""Models: three aggregators written as DGL message passing, one block, one encoder."""

from models.aggregators import AGGREGATORS, DotProductAttention, GATAttention, GCNAggregation
from models.encoder import GraphEncoder, build_model

__all__ = ["AGGREGATORS", "DotProductAttention", "GATAttention", "GCNAggregation", "GraphEncoder", "build_model"]
