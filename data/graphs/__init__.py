"""How a sentence becomes a graph.

A sentence of n tokens is a graph of n nodes; the construction decides who talks to whom. Edges are directed:
an edge ``src -> dst`` means "dst receives a message from src". Each construction is one module of this package,
named as ``graph=`` names it, which defines its ``build`` and registers its :class:`GraphKind`:

  complete.py     every token receives from every token: what a Transformer layer does.
  tree.py         the dataset's own tree, both ways along every edge (SST: the gold constituency tree with
                  *phrase* nodes; a dataset with no gold tree: its dependency parse, as ``dep``).
  dep.py          the dependency parse (spaCy's ``en_core_web_sm``): each word joined to its head word.
  binary_tree.py  the tree binarised left to right through phrase nodes: the binary Tree-LSTM's tree.
  window.py       every token receives from the tokens at most ``window`` positions away.
  bpt.py          the binary-partition graph of BP-Transformer (Ye et al., 2019): span nodes, O(k·n·log n) edges.
  knn.py          every token receives from its ``k`` nearest tokens in the model's current embedding space,
                  rebuilt in the forward pass (``models/knn.py``).
  none.py         every token hears only itself: a bag of tokens, the baseline with no interaction.

A new module of this package is imported (and so registered) after these without being listed.

What they share, one module each (none of them imports this package or a construction module):

  edges.py         plain edge functions (``complete_edges``, ``tree_edges``, ``knn_edges``...) and the edge types.
  tree_utils.py    ``binarise``, ``tree_schedule`` and the steps the tree constructions compose.
  positional.py    structural positional encodings (``lap_pe``, ``random_walk_pe``).
  registry.py      ``GraphKind``, ``Built``, ``register_graph``, ``graph_kind``: the registry.
  construction.py  ``GraphConstruction``: the shared assembler (``<phrase>`` tokens, positions, root, edge types,
                   positional encoding, ``<cls>``) around a construction's ``build``; ``make_construction``:
                   a run's construction from its graph and model configs.
  lift.py          the WordPiece lifting rule (``lift_edges``), used by ``data/wordpiece.py``.

``self_loops`` adds ``i -> i`` so a node keeps its own state in the aggregation (the Transformer's query attends
to its own key). A ``<cls>`` virtual node, when the readout asks for one, is appended as the last node and
exchanges messages with every token.

Every edge carries a type in ``edata['etype']``, so a message can know where it comes from
(``model.edge_types``): from the node itself, from a child (up the tree), from the head (down the tree), from a
token to the left or to the right (every edge that is not a tree edge), or to/from the ``<cls>`` node. Tree
constructions also store, per node, ``ndata['parent']`` (-1 at a root), ``ndata['slot']`` (its index among its
parent's children) and ``ndata['height']`` (0 at a leaf, 1 + the tallest child otherwise): the schedule of the
recursive models (``models/recursive.py``).

``graph=dep`` travels: ``make_construction({"name": "dep", ...}, vocab, model_cfg)`` (``construction.py``) ->
``GraphConstruction(name="dep")``, whose ``kind`` is ``GRAPH_KINDS["dep"]`` (``graph_kind``, ``registry.py``:
the entry ``dep.py`` registered when this package imported it) -> for each sentence
``construction(tok_ids, heads)`` -> ``kind.build``, i.e. ``dep.build`` -> ``tree_utils.heads_over`` and
``tree_built`` -> ``edges.tree_edges``.
"""

import importlib
import pkgutil

from data.graphs.construction import GraphConstruction, make_construction
from data.graphs.edges import (
    CLS_EDGE,
    EDGE_TYPES,
    FROM_CHILD,
    FROM_HEAD,
    FROM_LEFT,
    FROM_RIGHT,
    SELF,
    Edges,
    cls_edges,
    complete_edges,
    edge_types,
    knn_edges,
    positional_edge_types,
    self_loop_edges,
    tree_edges,
    window_edges,
)
from data.graphs.positional import PE_GRAPHS, STRUCTURAL_PE, laplacian_pe, random_walk_pe, sign_of_peak
from data.graphs.registry import GRAPH_KINDS, Built, GraphKind, graph_kind, register_graph, tree_graphs
from data.graphs.tree_utils import binarise, children_of, tree_schedule

# The built-in constructions, each registering itself, in the order the docs list them (and GRAPH_KINDS keeps).
# isort: off
from data.graphs import complete, tree, dep, binary_tree, window, bpt, knn, none  # noqa: F401

# isort: on
from data.graphs.bpt import bpt_edges, bpt_spans

# Any other module of this package (a graph added since) registers itself after them: no list to extend.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

GRAPHS = tuple(GRAPH_KINDS)  # the constructions of this package, in the order the docs list them

__all__ = [
    "CLS_EDGE",
    "EDGE_TYPES",
    "FROM_CHILD",
    "FROM_HEAD",
    "FROM_LEFT",
    "FROM_RIGHT",
    "GRAPHS",
    "GRAPH_KINDS",
    "PE_GRAPHS",
    "SELF",
    "STRUCTURAL_PE",
    "Built",
    "Edges",
    "GraphConstruction",
    "GraphKind",
    "binarise",
    "bpt_edges",
    "bpt_spans",
    "children_of",
    "cls_edges",
    "complete_edges",
    "edge_types",
    "graph_kind",
    "knn_edges",
    "laplacian_pe",
    "make_construction",
    "positional_edge_types",
    "random_walk_pe",
    "register_graph",
    "self_loop_edges",
    "sign_of_peak",
    "tree_edges",
    "tree_graphs",
    "tree_schedule",
    "window_edges",
]
