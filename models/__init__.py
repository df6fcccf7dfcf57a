"""Models: aggregators written as DGL message passing, one block, one encoder; and recursive tree models.

Every module of this package is imported here, so a module that registers a model family
(``models.registry.register_family``) is found without being listed anywhere.
"""

import importlib
import pkgutil

from models.aggregators import AGGREGATORS, DotProductAttention, GATAttention, GCNAggregation
from models.encoder import EncoderConfig, GraphEncoder
from models.recursive import RECURSIVE_MODELS, RecursiveConfig, RecursiveEncoder
from models.registry import MODEL_FAMILIES, build_model, family_of, make_construction, model_config, model_names

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

MODELS = model_names()  # the model names of the families above (model_names() also has any registered later)

__all__ = [
    "AGGREGATORS",
    "MODELS",
    "MODEL_FAMILIES",
    "RECURSIVE_MODELS",
    "DotProductAttention",
    "EncoderConfig",
    "GATAttention",
    "GCNAggregation",
    "GraphEncoder",
    "RecursiveConfig",
    "RecursiveEncoder",
    "build_model",
    "family_of",
    "make_construction",
    "model_config",
    "model_names",
]
