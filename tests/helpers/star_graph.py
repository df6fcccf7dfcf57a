"""A toy graph for the registry tests, written as a new module of data/graphs/ would be: ``graph=star``.

Every token hears the first, and the first hears every token (plus self loops). Importing the module registers
it, as ``data/graphs/__init__.py`` imports each construction module.
"""

from __future__ import annotations

import torch

from data.graphs.registry import Built, GraphKind, register_graph


def build(c, n: int, heads, tree) -> Built:
    others = torch.arange(1, n)
    src = torch.cat([torch.zeros(n - 1, dtype=torch.long), others])
    dst = torch.cat([others, torch.zeros(n - 1, dtype=torch.long)])
    if c.self_loops:
        src, dst = torch.cat([src, torch.arange(n)]), torch.cat([dst, torch.arange(n)])
    return Built(src, dst)


KIND = register_graph(GraphKind("star", build, "every token linked to the first"))
