"""The shared assembler: :class:`GraphConstruction` turns one sentence into a DGL graph.

A construction's own ``build`` (``data/graphs/<name>.py``) gives the edges, and any extra nodes, tree and root;
everything else is assembled here the same way for every construction: the ``<phrase>`` tokens of extra
nodes, positions, the root flag, edge types, the structural positional encoding and the ``<cls>`` node.
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass

import dgl
import torch

from data.graphs.complete import KIND as COMPLETE
from data.graphs.edges import CLS_EDGE, SELF, Edges, cls_edges, edge_types
from data.graphs.positional import PE_GRAPHS, STRUCTURAL_PE, positions
from data.graphs.registry import Built, GraphKind, graph_kind
from data.graphs.tree_utils import tree_schedule
from data.vocab import PHRASE, SPECIALS


def held_kind(name: str, looked_up: GraphKind | None) -> GraphKind:
    """The registry entry a construction named ``name`` holds: ``looked_up`` when its caller has it (checked to be
    ``name``'s), else :func:`graph_kind`'s (an unknown name refused in one line)."""
    if looked_up is None:
        return graph_kind(name)
    if looked_up.name != name:
        raise ValueError(f"a construction of graph={name} given the registry entry of graph={looked_up.name}")
    return looked_up


class HoldsKind:
    """What a construction (``GraphConstruction``, ``data.wordpiece.PieceConstruction``) does with the registry
    entry it holds: reads it as ``kind``, and leaves it out when pickled (a loader's copy, a checkpoint: the
    entry's functions may be lambdas), looking it up again by ``name`` when read back."""

    name: str
    _kind: GraphKind

    @property
    def kind(self) -> GraphKind:
        """The graph's registry entry: the caller's (``looked_up``), else looked up once when made."""
        return self._kind

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_kind"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._kind = graph_kind(self.name)


@dataclass
class GraphConstruction(HoldsKind):
    """A named construction with its settings: ``construction(tok_ids, heads) -> DGLGraph``.

    The graph carries ``ndata['tok']`` (token ids), ``ndata['pos']`` (positions, -1 for
    ``<cls>``) and ``ndata['root']`` (True at the tree's root, else at token 0).
    For a ``dynamic`` construction (knn), the graph built here holds only the nodes (and ``<cls>``
    edges); the model rebuilds its edges from its current features (``models/knn.py``).
    Its facts (tree, extra nodes, edge count...) are its :class:`GraphKind`'s, ``self.kind``: the registry entry
    the caller looked up (``looked_up``: ``engine.config.check_config``'s, handed down by ``make_construction``),
    else looked up here, once. The fields are the graph cache's key (``data/pipeline.py``): a new field changes
    every key; ``looked_up`` is no field (not in ``asdict``, the key, ``repr`` or ``==``).
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
    looked_up: InitVar[GraphKind | None] = None  # GRAPH_KINDS[name], when the caller has it

    def __post_init__(self, looked_up: GraphKind | None):
        kind = self._kind = held_kind(self.name, looked_up)
        if self.pe is not None and self.pe not in STRUCTURAL_PE:
            raise ValueError(f"unknown structural positional encoding {self.pe!r}; valid: {', '.join(STRUCTURAL_PE)}")
        if self.pe_graph not in PE_GRAPHS:
            raise ValueError(f"unknown model.pe_graph {self.pe_graph!r}; valid: {', '.join(PE_GRAPHS)}")
        if kind.check is not None:
            kind.check(self)

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
