"""A toy model family for the registry tests: the mean of the token embeddings, with no message passing.

It meets ``models.registry.ModelConfig`` with its own facts (no layers, no heads: its memory is one pass
over the nodes, ``memory="one_pass"`` when registered) and ``models.registry.Model``.
"""

from __future__ import annotations

from dataclasses import dataclass

import dgl
import torch


@dataclass(frozen=True)
class BagConfig:
    name: str
    hidden_dim: int

    impl = "sparse"  # it reads DGL graphs (dgl.mean_nodes): they must live where the model does

    @classmethod
    def from_mapping(cls, cfg):
        return cls(cfg["name"], int(cfg["hidden_dim"]))

    def check(self, graph):
        pass


class Bag(torch.nn.Module):
    """Mean of the token embeddings, then a linear layer."""

    impl: str

    def __init__(self, config, vocab_size, num_classes, construction=None):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab_size, config.hidden_dim)
        self.out = torch.nn.Linear(config.hidden_dim, num_classes)
        self.impl = config.impl

    def forward(self, g):
        with g.local_scope():
            g.ndata["h"] = self.embed(g.ndata["tok"])
            return self.out(dgl.mean_nodes(g, "h"))
