"""``graph=binary_tree``: the tree binarised, the tree the binary Tree-LSTM of Tai et al. (2015) reads.

Each head takes its dependents one at a time, left to right, through new *phrase* nodes (``[MAX 2 9 ]`` ->
``( ( ( [MAX 2 ) 9 ) ] )``, exactly the parentheses of the published ListOps files: ``binarise``). Tokens are
the leaves; phrase nodes (``pos = -1``) are joined to their two children, both ways. SST's gold trees are
binary already and are used as they are. Not built on word pieces.
"""

from __future__ import annotations

from data.graphs.registry import Built, GraphKind, register_graph
from data.graphs.tree_utils import binarise, children_of, gold_over, heads_over, tree_built, tree_count


def build(c, n: int, heads, tree) -> Built:
    if tree is None:
        return tree_built(c, n, *binarise(heads_over(c, n, heads)))
    parent, slot = gold_over(n, tree)
    if any(len(k) > 2 for k in children_of(parent)):
        raise ValueError(f"graph={c.name} needs a binary gold tree (SST's are); use graph=tree")
    return tree_built(c, n, parent, slot)


def check(c) -> None:
    """Its phrase nodes read the whole tree: no <cls> node; no structural positions for them."""
    if c.cls_id is not None:
        raise ValueError(
            "model.readout=cls adds a <cls> node, and graph=binary_tree's phrase nodes already read the "
            "whole tree: use model.readout=root (the root phrase) or mean"
        )
    if c.pe is not None:
        raise ValueError(
            f"model.positional={c.pe} is not defined on graph={c.name}'s phrase nodes; "
            "use model.positional=sinusoidal or none"
        )


KIND = register_graph(
    GraphKind(
        "binary_tree",
        build,
        "the tree binarised left to right through phrase nodes",
        is_tree=True,
        adds_nodes=True,
        binary=True,
        edge_count=tree_count,
        gold_tree=True,
        check=check,
    )
)
