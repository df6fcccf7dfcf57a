"""``graph=none``: every token hears only itself, a bag of tokens: the baseline with no interaction.
On word pieces: each word a bag of its pieces, which still read [CLS] and [SEP].
"""

from __future__ import annotations

from data.graphs.edges import self_loop_edges
from data.graphs.registry import Built, GraphKind, register_graph


def build(c, n: int, heads, tree) -> Built:
    return Built(*self_loop_edges(n))


def words(n: int, heads, parent, window: int, k: int):
    return (*self_loop_edges(n), 0, [])


def check(c) -> None:
    if c.pe is not None and c.pe_graph == "graph":
        raise ValueError(
            f"model.pe_graph=graph cannot use graph={c.name} (none has no edges to encode): "
            "use model.pe_graph=tree or chain"
        )


KIND = register_graph(
    GraphKind(
        "none",
        build,
        "every token hears only itself: a bag of tokens",
        check=check,
        word_graph=words,
    )
)
