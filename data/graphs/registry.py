"""The graph registry: one :class:`GraphKind` per construction, registered by the construction's own module.

``graph=<name>`` selects ``GRAPH_KINDS[name]`` (:func:`graph_kind`, the one place an unknown name is refused);
``data/graphs/<name>.py`` defines and registers it, and ``data/graphs/__init__.py`` imports every such module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass
class Built:
    """What a construction's ``build`` returns for one sentence of n tokens: its edges, and what the
    generic assembler (:meth:`GraphConstruction.__call__`) cannot infer."""

    src: torch.Tensor
    dst: torch.Tensor
    etype: torch.Tensor | None = None  # None: typed by :func:`edge_types` (from the tree's parents, if any)
    extra: int = 0  # nodes of its own after the tokens (phrases, spans): token <phrase>, pos -1
    parents: list[int] | None = None  # a tree construction's parent of every node (-1 at a root)
    order: list[int] | None = None  # and each node's slot among its parent's children (None: sentence order)
    root: int | None = None  # the node ``ndata['root']`` marks; None: the tree's root, else token 0


@dataclass(frozen=True)
class GraphKind:
    """What one graph construction is: its own ``build``, and the facts the rest of the code reads.

    ``build(construction, n, heads, tree) -> Built`` makes the edges of one sentence (``heads``: a tree
    over the tokens, -1 at a root; ``tree``: a gold ``(parent, slot)`` with phrase nodes, or None).
    ``edge_count(construction, n)``: the edges of an n-token sentence in closed form (exact or an upper
    bound), for the memory plan (None: build one and count). ``check(construction)``: the settings the
    construction refuses, one ``ValueError`` line each (None: it takes every setting). A ``dynamic``
    construction gets its edges in the model's forward pass, from the model's features (``models/knn.py``).
    """

    name: str
    build: Callable[..., Built]
    description: str = ""
    is_tree: bool = False  # carries a tree (ndata parent, slot, height): the recursive models can walk it
    adds_nodes: bool = False  # always adds about n nodes of its own (pos -1): 2n nodes for the memory plan
    dynamic: bool = False  # edges rebuilt from the model's features at every layer (kNN: models/knn.py)
    edge_count: Callable[..., int] | None = None
    gold_tree: bool = False  # reads a dataset's gold tree when it has one (else the dependency parse)
    text_only: bool = False  # needs a dependency parse: text datasets only
    binary: bool = False  # every node has at most two ordered children (the binary Tree-LSTM's cell)
    dense_complete: bool = False  # with self loops, every node hears every node: the dense path needs no mask
    check: Callable[..., None] | None = None  # check(construction): raises for a setting it refuses
    # the word-level graph data/wordpiece.py lifts to word pieces (a pretrained model's own tokens):
    # (n_words, heads, parent, window, k) -> (src, dst, extra nodes, their word spans), ``parent`` the gold tree
    # or None (a kind that reads no gold tree ignores it); None: not built on pieces
    word_graph: Callable | None = None


GRAPH_KINDS: dict[str, GraphKind] = {}


def register_graph(kind: GraphKind) -> GraphKind:
    """Add a construction to the registry (``graph=<name>`` then selects it; conf/graph/<name>.yaml sets its keys)."""
    GRAPH_KINDS[kind.name] = kind
    return kind


def graph_kind(name: str) -> GraphKind:
    """The registered construction ``name``; the one place an unknown graph name is refused."""
    if name not in GRAPH_KINDS:
        raise ValueError(f"unknown graph {name!r}; valid graphs: {', '.join(GRAPH_KINDS)}")
    return GRAPH_KINDS[name]


def tree_graphs() -> tuple[str, ...]:
    """The registered constructions that carry a tree."""
    return tuple(k.name for k in GRAPH_KINDS.values() if k.is_tree)


def refuses_pe_graph(why: str) -> Callable[..., None]:
    """A kind's ``check`` for a graph whose edges cannot be encoded as positions: ``model.pe_graph=graph``
    is refused in one line saying ``why`` (knn: they change every layer; none: there are none)."""

    def check(c) -> None:
        if c.pe is not None and c.pe_graph == "graph":
            raise ValueError(
                f"model.pe_graph=graph cannot use graph={c.name} ({why}): use model.pe_graph=tree or chain"
            )

    return check
