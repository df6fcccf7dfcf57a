"""Trees shared by the tree constructions (``tree``, ``dep``, ``binary_tree``) and the assembler.

``children_of``, ``binarise`` and ``tree_schedule`` are plain functions of a parent list; ``heads_over``,
``gold_over`` and ``tree_built`` are the steps each tree construction's ``build`` composes in its own way
(which tree it reads, whether it binarises), so no construction branches on another's flags.
"""

from __future__ import annotations

from data.graphs.edges import Edges, tree_edges
from data.graphs.registry import Built


def children_of(heads: list[int]) -> list[list[int]]:
    """The children of every node, in index order."""
    kids: list[list[int]] = [[] for _ in heads]
    for i, h in enumerate(heads):
        if h >= 0:
            kids[h].append(i)
    return kids


def binarise(heads: list[int]) -> tuple[list[int], list[int]]:
    """Left-to-right binarisation of a tree over n tokens: ``(parent, slot)`` of n tokens + p phrase nodes.

    A head with dependents d1..dk becomes k phrase nodes: ``(head d1)``, ``((head d1) d2)``, ...,
    the last standing where the head stood. ``slot`` is 0 for a phrase's left child, 1 for its
    right child (-1 at the root). Phrase nodes are numbered n, n+1, ... in the order they are made
    (a dependent's phrases before its head's). On ListOps this gives exactly the published files'
    parentheses: ``[MAX 2 9 ]`` (heads ``[-1, 0, 0, 0]``) -> ``( ( ( [MAX 2 ) 9 ) ] )``, phrases
    4 = (0 1), 5 = (4 2), 6 = (5 3).
    """
    kids = children_of(heads)
    parent, slot = list(heads), [-1] * len(heads)  # tokens first; phrase nodes are appended
    top = list(range(len(heads)))  # the node that stands for token i's whole subtree

    def build(i: int) -> None:
        for k in kids[i]:
            build(k)
        left = i
        for k in kids[i]:
            phrase = len(parent)
            parent.append(-1)
            slot.append(-1)
            parent[left], slot[left] = phrase, 0
            parent[top[k]], slot[top[k]] = phrase, 1
            left = phrase
        top[i] = left

    for r in (i for i, h in enumerate(heads) if h < 0):
        build(r)
    return parent, slot


def tree_schedule(parent: list[int], slot: list[int] | None = None) -> tuple[list[int], list[int]]:
    """``(slot, height)`` of every node. ``slot``, a node's place among its parent's children (-1 at
    a root), is taken as given or else counted in index (sentence) order. ``height`` is 0 at a leaf,
    1 + its tallest child's height otherwise: a node can be computed once every node of lower height
    is (the recursive models' level-by-level schedule)."""
    if slot is None:
        slot = [-1] * len(parent)
        for kids in children_of(parent):
            for s, k in enumerate(kids):
                slot[k] = s
    height = [0] * len(parent)
    depth = [0] * len(parent)
    for i in range(len(parent)):  # depth by walking up: trees here are small
        j = i
        while parent[j] >= 0:
            depth[i] += 1
            j = parent[j]
    for i in sorted(range(len(parent)), key=lambda i: -depth[i]):  # deepest first
        if parent[i] >= 0:
            height[parent[i]] = max(height[parent[i]], height[i] + 1)
    return list(slot), height


def heads_over(construction, n: int, heads: list[int] | None, what: str = "a tree") -> list[int]:
    """The sentence's tree over its n tokens (``heads``, -1 at a root), refused in one line when it has
    none (``what`` the construction needs) or it does not cover the tokens."""
    if heads is None:
        raise ValueError(
            f"graph={construction.name} needs {what} for every sentence; ListOps and the text datasets have one"
        )
    if len(heads) != n:
        raise ValueError(f"a tree over {len(heads)} tokens for a sentence of {n}")
    return list(heads)


def gold_over(n: int, tree) -> tuple[list[int], list[int]]:
    """A gold ``(parent, slot)`` over the n tokens and its phrase nodes after them (SST's constituency tree)."""
    parent, slot = list(tree[0]), list(tree[1])
    if len(parent) < n or len(slot) != len(parent):
        raise ValueError(f"a gold tree of {len(parent)} nodes for a sentence of {n} tokens")
    return parent, slot


def tree_built(construction, n: int, parents: list[int], order: list[int] | None) -> Built:
    """The tree's edges both ways (self loops as the construction says), its phrase nodes (``parents``
    beyond the n tokens) and its schedule: what a tree construction's ``build`` returns."""
    extra = len(parents) - n  # phrase nodes
    if extra and construction.pe is not None:
        raise ValueError(
            f"model.positional={construction.pe} is not defined on phrase nodes (graph={construction.name} on a gold "
            "constituency tree): use model.positional=sinusoidal or none, or graph=dep"
        )
    return Built(*tree_edges(parents, construction.self_loops), extra=extra, parents=parents, order=order)


def tree_count(construction, n: int) -> int:
    """The memory plan's edge count of a tree construction."""
    return 5 * n  # both ways along each tree edge, self loops (binary_tree: ~2n nodes)


def dependency_words(n: int, heads) -> tuple:
    """The word-level dependency tree over n words (self loops on), as ``GraphKind.word_graph`` returns it."""
    if heads is None or len(heads) != n:
        raise ValueError(f"a tree over {n} words needs one head per word: use a text dataset (parsed by spaCy)")
    edges: Edges = tree_edges(list(heads))
    return (*edges, 0, [])
