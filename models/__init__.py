"""Models: aggregators written as DGL message passing, one block, one encoder; and recursive tree models."""

from models.aggregators import AGGREGATORS, DotProductAttention, GATAttention, GCNAggregation
from models.encoder import MODELS, RECURSIVE_MODELS, GraphEncoder, build_model
from models.recursive import RecursiveEncoder

__all__ = [
    "AGGREGATORS",
    "MODELS",
    "RECURSIVE_MODELS",
    "DotProductAttention",
    "GATAttention",
    "GCNAggregation",
    "GraphEncoder",
    "RecursiveEncoder",
    "build_model",
]
