"""Plain edge functions: the edge list ``(src, dst)`` of one sentence (or of points), and the edge types.

Edges are directed: ``src -> dst`` means "dst receives a message from src". Nothing here knows about
constructions or the registry; the construction modules (``complete.py``, ``tree.py``, ...) call these.
"""

from __future__ import annotations

import dgl
import torch

# Edge types (edata['etype']): what the receiving node dst is to the sender src.
SELF, FROM_CHILD, FROM_HEAD, FROM_LEFT, FROM_RIGHT, CLS_EDGE = range(6)
EDGE_TYPES = ("self", "from_child", "from_head", "from_left", "from_right", "cls")

Edges = tuple[torch.Tensor, torch.Tensor]


def without_self_loops(src: torch.Tensor, dst: torch.Tensor) -> Edges:
    keep = src != dst
    return src[keep], dst[keep]


def with_self_loops(src: torch.Tensor, dst: torch.Tensor, n: int) -> Edges:
    src, dst = without_self_loops(src, dst)
    loop = torch.arange(n)
    return torch.cat([src, loop]), torch.cat([dst, loop])


def complete_edges(n: int, self_loops: bool = True) -> Edges:
    """Every token from every token: n^2 edges with self loops, n(n-1) without."""
    src = torch.arange(n).repeat_interleave(n)
    dst = torch.arange(n).repeat(n)
    return (src, dst) if self_loops else without_self_loops(src, dst)


def tree_edges(heads: list[int], self_loops: bool = True) -> Edges:
    """Each token to its head and back (``heads[i] = -1`` marks the root)."""
    child = torch.tensor([i for i, h in enumerate(heads) if h >= 0], dtype=torch.long)
    parent = torch.tensor([h for h in heads if h >= 0], dtype=torch.long)
    src, dst = torch.cat([child, parent]), torch.cat([parent, child])
    return with_self_loops(src, dst, len(heads)) if self_loops else (src, dst)


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
    The kNN graph's per-layer rebuild in the model (``models/knn.py``) calls this.
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
        s, d = g.edges()  # edge neighbour -> point (checked in tests/data/test_graphs.py)
        srcs.append(idx[s])
        dsts.append(idx[d])
    src, dst = torch.cat(srcs), torch.cat(dsts)
    if self_loops:
        loop = torch.arange(x.shape[0], device=x.device)
        src, dst = torch.cat([src, loop]), torch.cat([dst, loop])
    return src, dst


def edge_types(src: torch.Tensor, dst: torch.Tensor, parent: torch.Tensor | None = None) -> torch.Tensor:
    """``edata['etype']`` of edges ``src -> dst`` between nodes numbered in sentence order: from the
    node itself, from a child, from the head, else from the left or the right by index."""
    etype = torch.where(src < dst, FROM_LEFT, FROM_RIGHT)
    if parent is not None:
        etype = torch.where(parent[src] == dst, FROM_CHILD, etype)
        etype = torch.where(parent[dst] == src, FROM_HEAD, etype)
    return torch.where(src == dst, SELF, etype)


def positional_edge_types(pos: torch.Tensor) -> torch.Tensor:
    """(B, n, n) edge types of every pair of a padded batch by position alone (:func:`edge_types`
    without a tree): self on the diagonal, <cls> to/from a node with ``pos < 0``, else left/right.
    ``pos`` (B, n) is each node's position, -1 at <cls> (and at padding, which no edge touches)."""
    n = pos.shape[1]
    i = torch.arange(n, device=pos.device)
    etype = torch.where(i[None, :] < i[:, None], FROM_LEFT, FROM_RIGHT).expand(pos.shape[0], n, n)  # j < i: left
    etype = torch.where((pos[:, :, None] < 0) | (pos[:, None, :] < 0), CLS_EDGE, etype)
    return torch.where(torch.eye(n, dtype=torch.bool, device=pos.device), SELF, etype)
