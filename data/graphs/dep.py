"""``graph=dep``: the dependency parse (spaCy's ``en_core_web_sm``), each word joined to its head, both ways.

Text datasets only (ListOps has no parse: ``graph=tree`` is its expression's tree); the same tokens as every
other construction. A gold tree, where the dataset has one, is not read. On word pieces: the same tree.
"""

from __future__ import annotations

from data.graphs.registry import Built, GraphKind, register_graph
from data.graphs.tree_utils import dependency_words, heads_over, tree_built, tree_count


def build(c, n: int, heads, tree) -> Built:
    parse = heads_over(c, n, heads, "a dependency parse (text datasets have one)")
    return tree_built(c, n, parse, None)


def words(n: int, heads, parent, window: int, k: int):
    return dependency_words(n, heads)


KIND = register_graph(
    GraphKind(
        "dep",
        build,
        "spaCy's dependency parse: each word joined to its head, both ways",
        is_tree=True,
        edge_count=tree_count,
        text_only=True,
        word_graph=words,
    )
)
