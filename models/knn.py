"""The kNN graph's per-layer rebuild: edges from the model's current features, inside the forward pass.

``graph=knn`` (``data/graphs/knn.py``) is a ``dynamic`` construction: its graphs hold only their nodes (and the
``<cls>`` edges), and the encoder (``models/encoder.py``) calls :func:`rebuild` (a batched DGLGraph) or
:func:`rebuild_dense` (its padded twin, ``models.dense.DenseGraph``) before every block. Each token receives from
its ``construction.k`` nearest tokens (Euclidean, features detached: no gradient through the choice of edges),
plus self loops and the ``<cls>`` edges; tests/models/test_dense.py checks that both give the same graph.
"""

from __future__ import annotations

from dataclasses import replace

import dgl
import torch

from data.graphs.edges import edge_types, knn_edges, positional_edge_types


def knn_adjacency(h: torch.Tensor, candidates: torch.Tensor, k: int) -> torch.Tensor:
    """(B, n, n) bool: each candidate receives from its k nearest other candidates (Euclidean).

    ``h`` (B, n, d) padded features, ``candidates`` (B, n) bool. A graph with at most k+1
    candidates is joined completely, as in :func:`data.graphs.edges.knn_edges`.
    """
    h = h.detach()
    dist = torch.cdist(h, h)  # (B, n, n)
    n = h.shape[1]
    pair = candidates[:, :, None] & candidates[:, None, :] & ~torch.eye(n, dtype=torch.bool, device=h.device)
    dist = dist.masked_fill(~pair, float("inf"))
    k_eff = min(k, max(n - 1, 1))
    nearest = dist.topk(k_eff, dim=-1, largest=False)  # (B, n, k) per receiving point
    adj = torch.zeros_like(pair)
    adj.scatter_(-1, nearest.indices, torch.isfinite(nearest.values))
    return adj & pair


def rebuild(construction, g: dgl.DGLGraph, h: torch.Tensor) -> dgl.DGLGraph:
    """The kNN graph of a batch from node features ``h`` (N, d); same nodes as ``g``."""
    is_token = g.ndata["pos"] >= 0
    sizes = g.batch_num_nodes()
    k, self_loops = construction.k, construction.self_loops
    if construction.cls_id is None:
        src, dst = knn_edges(h, sizes.tolist(), k, self_loops)
        etype = edge_types(src, dst)
    else:  # kNN among tokens only, then the <cls> edges of the static graph
        token_idx = is_token.nonzero().squeeze(1)
        s, d = knn_edges(h[token_idx], (sizes - 1).tolist(), k, self_loops)
        cs, cd = g.edges()
        src, dst = torch.cat([token_idx[s], cs]), torch.cat([token_idx[d], cd])
        etype = torch.cat([edge_types(token_idx[s], token_idx[d]), g.edata["etype"].to(h.device)])
    out = dgl.graph((src, dst), num_nodes=g.num_nodes(), device=h.device)
    out.edata["etype"] = etype
    return out


def rebuild_dense(construction, dg, x: torch.Tensor, tokens: torch.Tensor, typed: bool):
    """This layer's kNN graph from padded features ``x`` (B, n, d) on the padded twin ``dg``, as :func:`rebuild`
    builds it sparse: tokens (``tokens`` (B, n) marks them) from their k nearest tokens, plus the static <cls>
    edges and self loops; ``typed``: also the (B, n, n) edge types."""
    adj = knn_adjacency(x, tokens, construction.k) | dg.adjacency()
    if construction.self_loops:
        adj = adj | (torch.eye(x.shape[1], dtype=torch.bool, device=x.device) & tokens[:, :, None])
    etype = positional_edge_types(torch.where(tokens, 0, -1)) if typed else None  # pos -1 marks <cls>
    return replace(dg, adj=adj, etype=etype)
