"""``graph=complete``: every token receives from every token, what a Transformer layer does.

n^2 edges with self loops (n(n-1) without); with self loops the dense path needs no adjacency mask.
On word pieces: the complete word graph, which lifts to BERT's full attention.
"""

from __future__ import annotations

from data.graphs.edges import complete_edges
from data.graphs.registry import Built, GraphKind, register_graph


def build(c, n: int, heads, tree) -> Built:
    return Built(*complete_edges(n, c.self_loops))


def words(n: int, heads, parent, window: int, k: int):
    return (*complete_edges(n), 0, [])


KIND = register_graph(
    GraphKind(
        "complete",
        build,
        "every token receives from every token: a Transformer layer",
        edge_count=lambda c, n: n * n if c.self_loops else n * (n - 1),
        dense_complete=True,
        word_graph=words,
    )
)
