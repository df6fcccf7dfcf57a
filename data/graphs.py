"""How a sentence becomes a graph.

A sentence of n tokens is a graph of n nodes; the construction decides who talks to whom.
Edges are directed: an edge ``src -> dst`` means "dst receives a message from src". Every
function here returns the edge list ``(src, dst)`` of one sentence, so the constructions are
short, testable and can be read next to each other:

  complete   every token receives from every token: what a Transformer layer does.
  tree       tokens are joined to their parent in the (gold or parsed) syntax tree, both ways:
             a Tree-LSTM-like inductive bias.
  window     every token receives from the tokens at most ``window`` positions away: a
             convolution / local attention.
  knn        every token receives from its ``k`` nearest tokens in the model's current
             embedding space: a graph the model learns, rebuilt in the forward pass
             (``dgl.segmented_knn_graph``, no gradient through the choice of edges).
  none       every token hears only itself: a bag of tokens, the baseline with no interaction.

``self_loops`` adds ``i -> i`` so a node keeps its own state in the aggregation (the
Transformer's query attends to its own key). A ``<cls>`` virtual node, when the readout asks
for one, is appended as the last node and exchanges messages with every token.
"""

from __future__ import annotations

from dataclasses import dataclass

import dgl
import torch

GRAPHS = ("complete", "tree", "window", "knn", "none")

Edges = tuple[torch.Tensor, torch.Tensor]


def _without_self_loops(src: torch.Tensor, dst: torch.Tensor) -> Edges:
    keep = src != dst
    return src[keep], dst[keep]


def _with_self_loops(src: torch.Tensor, dst: torch.Tensor, n: int) -> Edges:
    src, dst = _without_self_loops(src, dst)
    loop = torch.arange(n)
    return torch.cat([src, loop]), torch.cat([dst, loop])


def complete_edges(n: int, self_loops: bool = True) -> Edges:
    """Every token from every token: n^2 edges with self loops, n(n-1) without."""
    src = torch.arange(n).repeat_interleave(n)
    dst = torch.arange(n).repeat(n)
    return (src, dst) if self_loops else _without_self_loops(src, dst)


def tree_edges(heads: list[int], self_loops: bool = True) -> Edges:
    """Each token to its head and back (``heads[i] = -1`` marks the root)."""
    child = torch.tensor([i for i, h in enumerate(heads) if h >= 0], dtype=torch.long)
    parent = torch.tensor([h for h in heads if h >= 0], dtype=torch.long)
    src, dst = torch.cat([child, parent]), torch.cat([parent, child])
    return _with_self_loops(src, dst, len(heads)) if self_loops else (src, dst)


def window_edges(n: int, window: int, self_loops: bool = True) -> Edges:
    """Token i from every token j with ``|i - j| <= window``."""
    src, dst = complete_edges(n, self_loops)
    keep = (src - dst).abs() <= window
    return src[keep], dst[keep]


def self_loop_edges(n: int) -> Edges:
    """Each token hears only itself."""
    loop = torch.arange(n)
    return loop, loop.clone()


def cls_edges(n: int, self_loops: bool = True) -> Edges:
    """Edges between the ``<cls>`` node (index n) and tokens 0..n-1, both ways."""
    tokens = torch.arange(n)
    cls = torch.full((n,), n, dtype=torch.long)
    src, dst = torch.cat([tokens, cls]), torch.cat([cls, tokens])
    if self_loops:
        src, dst = torch.cat([src, torch.tensor([n])]), torch.cat([dst, torch.tensor([n])])
    return src, dst


def knn_edges(x: torch.Tensor, sizes: list[int], k: int, self_loops: bool = True) -> Edges:
    """Each point from its ``k`` nearest other points of the same segment (edges over all points).

    ``x`` is (N, d) with segments of ``sizes`` points laid end to end. A segment with at most
    k+1 points is joined completely (every point has fewer than k others to choose from).
    """
    x = x.detach()
    offsets = torch.tensor([0] + list(sizes[:-1]), device=x.device).cumsum(0)
    small = [i for i, s in enumerate(sizes) if s <= k + 1]
    large = [i for i, s in enumerate(sizes) if s > k + 1]
    srcs, dsts = [], []
    for i in small:
        s, d = complete_edges(sizes[i], self_loops=False)
        srcs.append(s.to(x.device) + offsets[i])
        dsts.append(d.to(x.device) + offsets[i])
    if large:
        idx = torch.cat([torch.arange(sizes[i], device=x.device) + offsets[i] for i in large])
        g = dgl.segmented_knn_graph(x[idx], k, [sizes[i] for i in large], exclude_self=True)
        s, d = g.edges()  # edge neighbour -> point (checked in tests/test_graphs.py)
        srcs.append(idx[s])
        dsts.append(idx[d])
    src, dst = torch.cat(srcs), torch.cat(dsts)
    if self_loops:
        loop = torch.arange(x.shape[0], device=x.device)
        src, dst = torch.cat([src, loop]), torch.cat([dst, loop])
    return src, dst


@dataclass
class GraphConstruction:
    """A named construction with its settings: ``construction(tok_ids, heads) -> DGLGraph``.

    The graph carries ``ndata['tok']`` (token ids), ``ndata['pos']`` (positions, -1 for
    ``<cls>``) and ``ndata['root']`` (True at the tree's root, else at token 0).
    For ``knn`` (``dynamic``), the graph built here holds only the nodes (and ``<cls>`` edges);
    the model calls :meth:`rebuild` with its current features.
    """

    name: str = "complete"
    self_loops: bool = True
    window: int = 2
    k: int = 4
    cls_id: int | None = None  # append a <cls> virtual node with this token id

    def __post_init__(self):
        if self.name not in GRAPHS:
            raise ValueError(f"unknown graph {self.name!r}; valid graphs: {', '.join(GRAPHS)}")

    @property
    def dynamic(self) -> bool:
        return self.name == "knn"

    def edges(self, n: int, heads: list[int] | None) -> Edges:
        if self.name == "complete":
            return complete_edges(n, self.self_loops)
        if self.name == "tree":
            if heads is None:
                raise ValueError("graph=tree needs a tree for every sentence (ListOps has one; text needs a parser)")
            return tree_edges(heads, self.self_loops)
        if self.name == "window":
            return window_edges(n, self.window, self.self_loops)
        if self.name == "none":
            return self_loop_edges(n)
        return torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long)  # knn: edges come later

    def __call__(self, tok_ids: list[int], heads: list[int] | None = None) -> dgl.DGLGraph:
        n = len(tok_ids)
        src, dst = self.edges(n, heads)
        tok, pos = torch.tensor(tok_ids, dtype=torch.long), torch.arange(n)
        root = torch.zeros(n, dtype=torch.bool)
        root[heads.index(-1) if heads is not None and -1 in heads else 0] = True
        if self.cls_id is not None:
            cs, cd = cls_edges(n, self.self_loops)
            src, dst = torch.cat([src, cs]), torch.cat([dst, cd])
            tok = torch.cat([tok, torch.tensor([self.cls_id])])
            pos = torch.cat([pos, torch.tensor([-1])])
            root = torch.cat([root, torch.tensor([False])])
            n += 1
        g = dgl.graph((src, dst), num_nodes=n)
        g.ndata["tok"], g.ndata["pos"], g.ndata["root"] = tok, pos, root
        return g

    def rebuild(self, g: dgl.DGLGraph, h: torch.Tensor) -> dgl.DGLGraph:
        """The kNN graph of a batch from node features ``h`` (N, d); same nodes as ``g``."""
        is_token = g.ndata["pos"] >= 0
        sizes = g.batch_num_nodes()
        if self.cls_id is None:
            src, dst = knn_edges(h, sizes.tolist(), self.k, self.self_loops)
        else:  # kNN among tokens only, then the <cls> edges of the static graph
            token_idx = is_token.nonzero().squeeze(1)
            s, d = knn_edges(h[token_idx], (sizes - 1).tolist(), self.k, self.self_loops)
            cs, cd = g.edges()
            src, dst = torch.cat([token_idx[s], cs]), torch.cat([token_idx[d], cd])
        return dgl.graph((src, dst), num_nodes=g.num_nodes(), device=h.device)
