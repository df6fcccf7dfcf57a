"""``graph=none``: every token hears only itself, a bag of tokens: the baseline with no interaction.
On word pieces: each word a bag of its pieces, which still read [CLS] and [SEP].
"""

from __future__ import annotations

from data.graphs.edges import self_loop_edges
from data.graphs.registry import Built, GraphKind, refuses_pe_graph, register_graph


def build(c, n: int, heads, tree) -> Built:
    return Built(*self_loop_edges(n))


def words(n: int, heads, parent, window: int, k: int):
    return (*self_loop_edges(n), 0, [])


KIND = register_graph(
    GraphKind(
        "none",
        build,
        "every token hears only itself: a bag of tokens",
        check=refuses_pe_graph("none has no edges to encode"),
        word_graph=words,
    )
)
