"""A GraphEncoder and a RecursiveEncoder for the model tests, built as train.py builds them: from a typed config made from the
YAML (``models.registry.yaml_config``), with the test's knobs over it.

The tests below were written when GraphEncoder's signature carried defaults; two of those differed from
the YAML (``impl=sparse``, ``dense_min_density=0.0``), and a test that names neither keeps them.
"""

from __future__ import annotations

from models.encoder import GraphEncoder
from models.recursive import RecursiveEncoder
from models.registry import yaml_config


def graph_encoder(vocab_size: int, num_classes: int, aggregator: str = "transformer", construction=None, **knobs):
    """conf/model/transformer.yaml's encoder (conf/encoder/default.yaml) with ``aggregator`` and ``knobs``."""
    knobs = {"impl": "sparse", "dense_min_density": 0.0, **knobs}
    return GraphEncoder(yaml_config("transformer", name=aggregator, **knobs), vocab_size, num_classes, construction)


def recursive_encoder(vocab_size: int, num_classes: int, cell: str = "childsum", **knobs):
    """conf/model/treelstm.yaml's model (its values were RecursiveEncoder's old defaults) with ``cell`` and ``knobs``."""
    return RecursiveEncoder(yaml_config("treelstm", cell=cell, **knobs), vocab_size, num_classes)
