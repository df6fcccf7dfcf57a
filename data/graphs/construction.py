"""The shared assembler: :class:`GraphConstruction` turns one sentence into a DGL graph, and
:func:`make_construction` makes a run's word-level construction from its graph and model configs.

A construction's own ``build`` (``data/graphs/<name>.py``) gives the edges, and any extra nodes, tree and root;
everything else is assembled here the same way for every construction: the ``<phrase>`` tokens of extra
nodes, positions, the root flag, edge types, the structural positional encoding and the ``<cls>`` node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import dgl
import torch

from data.graphs.complete import KIND as COMPLETE
from data.graphs.edges import CLS_EDGE, SELF, Edges, cls_edges, edge_types
from data.graphs.positional import PE_GRAPHS, STRUCTURAL_PE, positions
from data.graphs.registry import Built, GraphKind, graph_kind
from data.graphs.tree_utils import tree_schedule
from data.vocab import PHRASE, SPECIALS, Vocab


@dataclass
class GraphConstruction:
    """A named construction with its settings: ``construction(tok_ids, heads) -> DGLGraph``.

    The graph carries ``ndata['tok']`` (token ids), ``ndata['pos']`` (positions, -1 for
    ``<cls>``) and ``ndata['root']`` (True at the tree's root, else at token 0).
    For a ``dynamic`` construction (knn), the graph built here holds only the nodes (and ``<cls>``
    edges); the model rebuilds its edges from its current features (``models/knn.py``).
    Its facts (tree, extra nodes, edge count...) are its :class:`GraphKind`'s, ``self.kind``: the registry
    entry of ``name``. The fields are the graph cache's key (``data/graph_cache.py``): a new field changes
    every key.
    """

    name: str = COMPLETE.name  # the default construction
    self_loops: bool = True
    window: int = 2
    k: int = 4
    cls_id: int | None = None  # append a <cls> virtual node with this token id
    phrase_id: int = SPECIALS.index(PHRASE)  # binary_tree: the token id of phrase nodes (<phrase>)
    pe: str | None = None  # lap_pe | random_walk_pe: store ndata['pe'] (n, pe_dim), zeros at <cls>
    pe_dim: int = 8
    pe_graph: str = "tree"  # the graph the positions come from: tree | chain (i - 1 -- i) | graph (this one)

    def __post_init__(self):
        kind = self.kind  # an unknown name: the registry's one line
        if self.pe is not None and self.pe not in STRUCTURAL_PE:
            raise ValueError(f"unknown structural positional encoding {self.pe!r}; valid: {', '.join(STRUCTURAL_PE)}")
        if self.pe_graph not in PE_GRAPHS:
            raise ValueError(f"unknown model.pe_graph {self.pe_graph!r}; valid: {', '.join(PE_GRAPHS)}")
        if kind.check is not None:
            kind.check(self)

    @property
    def kind(self) -> GraphKind:
        """The graph's registry entry: ``GRAPH_KINDS[self.name]``."""
        return graph_kind(self.name)

    @property
    def dynamic(self) -> bool:
        return self.kind.dynamic

    @property
    def dense_complete(self) -> bool:
        """Every node hears every node (self included): the dense twin needs no adjacency mask."""
        return self.kind.dense_complete and self.self_loops

    def num_nodes(self, n: int) -> int:
        """Nodes of the graph of an n-token sentence (an upper bound: <cls> aside), for the memory plan."""
        return 2 * n if self.kind.adds_nodes else n

    def edge_count(self, n: int) -> int:
        """Edges of the graph of one n-token sentence, without building the big ones."""
        if self.kind.edge_count is not None:
            return self.kind.edge_count(self, n)
        return self(list(range(n)), [-1] + [0] * (n - 1)).num_edges()

    def positions(self, n: int, heads: list[int] | None, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        """The structural positional encoding (n, pe_dim) of one sentence."""
        return positions(self.pe, self.pe_dim, self.pe_graph, n, heads, src, dst)

    def edges(self, n: int, heads: list[int] | None) -> Edges:
        """The edges over the n tokens (and any nodes of the construction's own) of one sentence."""
        built = self.kind.build(self, n, heads, None)
        return built.src, built.dst

    def __call__(self, tok_ids: list[int], heads: list[int] | None = None, tree=None) -> dgl.DGLGraph:
        """The graph of one sentence: token ids, its tree over the tokens (``heads``, -1 at a root) and,
        where the dataset has one, its gold tree ``(parent, slot)`` with phrase nodes (SST). The
        construction's ``build`` gives the edges; everything else is assembled the same way for all."""
        n = len(tok_ids)
        built = self.kind.build(self, n, heads, tree)
        src, dst, extra, parents, order = built.src, built.dst, built.extra, built.parents, built.order
        tok = torch.cat(
            [torch.tensor(tok_ids, dtype=torch.long), torch.full((extra,), self.phrase_id, dtype=torch.long)]
        )
        pos = torch.cat([torch.arange(n), torch.full((extra,), -1, dtype=torch.long)])
        root = self._root(len(tok), built, heads)
        parent = torch.tensor(parents, dtype=torch.long) if parents is not None else None
        etype = built.etype if built.etype is not None else edge_types(src, dst, parent)
        pe = self.positions(n, heads, src, dst) if self.pe is not None else None
        nodes = {"tok": tok, "pos": pos, "root": root, "pe": pe, "parent": parent}
        if self.cls_id is not None:
            src, dst, etype = self._add_cls(nodes, src, dst, etype)
            parents = None if parents is None else parents + [-1]
            order = None if order is None else order + [-1]
        g = dgl.graph((src, dst), num_nodes=len(nodes["tok"]))
        g.ndata["tok"], g.ndata["pos"], g.ndata["root"] = nodes["tok"], nodes["pos"], nodes["root"]
        g.edata["etype"] = etype
        if parents is not None:
            slot, height = tree_schedule(parents, order)
            g.ndata["parent"] = nodes["parent"]
            g.ndata["slot"], g.ndata["height"] = torch.tensor(slot), torch.tensor(height)
        if nodes["pe"] is not None:
            g.ndata["pe"] = nodes["pe"]
        return g

    @staticmethod
    def _root(num: int, built: Built, heads: list[int] | None) -> torch.Tensor:
        """(num,) bool: the node ``build`` names, else the tree's root, else token 0."""
        root = torch.zeros(num, dtype=torch.bool)
        ref = built.parents if built.parents is not None else heads
        if built.root is not None:
            root[built.root] = True
        else:
            root[ref.index(-1) if ref is not None and -1 in ref else 0] = True
        return root

    def _add_cls(self, nodes: dict, src: torch.Tensor, dst: torch.Tensor, etype: torch.Tensor):
        """Append the ``<cls>`` node (to ``nodes``, in place) and its edges to and from every node."""
        num = len(nodes["tok"])
        cs, cd = cls_edges(num, self.self_loops)
        cls_type = torch.where(cs == cd, SELF, CLS_EDGE)
        nodes["tok"] = torch.cat([nodes["tok"], torch.tensor([self.cls_id])])
        nodes["pos"] = torch.cat([nodes["pos"], torch.tensor([-1])])
        nodes["root"] = torch.cat([nodes["root"], torch.tensor([False])])
        if nodes["pe"] is not None:
            nodes["pe"] = torch.cat([nodes["pe"], torch.zeros(1, self.pe_dim)])
        if nodes["parent"] is not None:
            nodes["parent"] = torch.cat([nodes["parent"], torch.tensor([-1])])
        return torch.cat([src, cs]), torch.cat([dst, cd]), torch.cat([etype, cls_type])


MODEL_SETTINGS = ("cls_id", "phrase_id", "pe", "pe_dim", "pe_graph")  # set from the model and vocabulary below


def make_construction(graph_cfg: Mapping, vocab: Vocab, model_cfg) -> GraphConstruction:
    """The word-level graph construction for ``graph_cfg``, with what the model needs on its graphs
    (a ``<cls>`` node for ``readout=cls``; ``ndata['pe']`` for a structural positional encoding).
    ``model_cfg``: the model's typed config or a mapping. A family whose graphs are built on its own tokens
    (a pretrained model's word pieces) brings its own construction instead (``models.make_construction``
    picks)."""
    kind = graph_kind(graph_cfg["name"])  # an unknown name: the registry's one line
    model_cfg = model_cfg if isinstance(model_cfg, Mapping) else vars(model_cfg)  # a typed config: its fields
    positional = model_cfg.get("positional", "none")
    # the graph's own settings (self_loops, window, k, ... : GraphConstruction's fields), as its YAML sets them
    settings = {
        f.name: type(f.default)(graph_cfg[f.name])
        for f in dataclasses.fields(GraphConstruction)
        if f.name in graph_cfg and f.name not in MODEL_SETTINGS and isinstance(f.default, bool | int | float | str)
    }
    return GraphConstruction(
        **settings,
        cls_id=vocab.cls_id if model_cfg.get("readout", "mean") == "cls" else None,
        # phrase nodes (binary_tree; tree on a gold constituency tree) are <phrase> tokens; vocabularies
        # saved before <phrase> existed cannot read binary_tree, and never met a gold tree
        **({"phrase_id": vocab.phrase_id} if kind.adds_nodes or PHRASE in vocab.stoi else {}),
        pe=positional if positional in STRUCTURAL_PE else None,
        pe_dim=int(model_cfg.get("pe_dim", 8)),
        pe_graph=model_cfg.get("pe_graph", "tree"),
    )
