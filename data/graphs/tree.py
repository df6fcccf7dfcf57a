"""``graph=tree``: the dataset's own tree, both ways along every edge (a Tree-LSTM-like inductive bias).

ListOps: the expression's tree (operator heads, arguments below). SST: the gold constituency tree, with a
*phrase* node (``pos = -1``, token ``<phrase>``) for every inner node, so ``readout=root`` reads the root
phrase. A dataset with no gold tree (TREC, SST-2, your files) uses its dependency parse, as ``dep`` does.
On word pieces: the gold tree with its phrases as extra nodes, else the dependency tree.
"""

from __future__ import annotations

from data.graphs.lift import constituency_edges
from data.graphs.registry import Built, GraphKind, register_graph
from data.graphs.tree_utils import dependency_words, gold_over, heads_over, tree_built, tree_count


def build(c, n: int, heads, tree) -> Built:
    """The gold tree as it is where the sentence has one, else the tree over the tokens."""
    if tree is not None:
        return tree_built(c, n, *gold_over(n, tree))
    return tree_built(c, n, heads_over(c, n, heads), None)


def words(n: int, heads, parent, window: int, k: int):
    """The gold constituency tree (``parent``: phrases become extra nodes), else the dependency tree."""
    if parent is not None:
        return constituency_edges(list(parent), n)
    return dependency_words(n, heads)


KIND = register_graph(
    GraphKind(
        "tree",
        build,
        "the dataset's tree, both ways (SST: the gold tree with phrase nodes; else the dependency parse)",
        is_tree=True,
        edge_count=tree_count,
        gold_tree=True,
        word_graph=words,
    )
)
