"""``graph=knn``: every token receives from its ``k`` nearest tokens in the model's current embedding space.

A graph the model learns: the graph built here holds only the nodes (and the ``<cls>`` edges); its edges are
rebuilt from the model's features at every layer, in the forward pass, by ``models/knn.py``
(``dgl.segmented_knn_graph`` through :func:`data.graphs.edges.knn_edges`; no gradient through the choice of
edges). ``conf/graph/knn.yaml`` sets ``k``. Not built on word pieces.
"""

from __future__ import annotations

import torch

from data.graphs.registry import Built, GraphKind, refuses_pe_graph, register_graph


def build(c, n: int, heads, tree) -> Built:
    return Built(torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long))  # edges come later


KIND = register_graph(
    GraphKind(
        "knn",
        build,
        "every token receives from its k nearest tokens in the model's current features, rebuilt per layer",
        dynamic=True,
        edge_count=lambda c, n: (c.k + 1) * n,  # k neighbours and a self loop per token
        check=refuses_pe_graph("knn's edges change every layer"),
    )
)
