"""Message-passing attention in stock torch: the sparse side of the hardware lottery on any device.

DGL computes attention over a graph's edges as ``u_dot_v`` (a score per edge) -> ``edge_softmax``
(normalise over each node's incoming edges) -> ``u_mul_e`` + ``sum`` (weighted values summed at the
receiver), see ``models/aggregators/transformer.py``. The same three steps need nothing but torch's gather and
scatter ops:

  1. gather ``q`` at each edge's receiver and ``k`` at its sender, dot them: a score per edge;
  2. a segment softmax over the edges that share a receiver: the maximum per receiver by
     ``scatter_reduce(amax)``, then ``exp`` and the sum per receiver by ``index_add_``;
  3. weight ``v`` at each edge's sender and ``index_add_`` it into the receiver.

So sparse attention runs wherever torch runs, CUDA included, without DGL's CUDA build (PyPI ships
none): ``bench/hardware_lottery.py`` times it against ``scaled_dot_product_attention`` masked by
the adjacency. tests/models/test_torch_mp.py checks it equals DGL's path and SDPA, forward and
backward. A node with no incoming edge receives nothing: its output is 0, as DGL's ``fn.sum`` gives.
"""

from __future__ import annotations

import torch


def segment_softmax(scores: torch.Tensor, dst: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Softmax of ``scores`` (E, ...) over the edges that share a receiver ``dst`` (E,): DGL's ``edge_softmax``.

    The maximum subtracted for stability is taken without gradient: a softmax does not depend on it.
    """
    index = dst.view((-1,) + (1,) * (scores.dim() - 1)).expand_as(scores)
    with torch.no_grad():
        peak = scores.new_full((num_nodes,) + scores.shape[1:], float("-inf"))
        peak = peak.scatter_reduce(0, index, scores, reduce="amax", include_self=True)
    weights = torch.exp(scores - peak.gather(0, index))
    total = torch.zeros_like(peak).index_add_(0, dst, weights)
    return weights / total.gather(0, index)


def mp_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    src: torch.Tensor,
    dst: torch.Tensor,
    scale: float | None = None,
) -> torch.Tensor:
    """Attention along edges ``src[e] -> dst[e]``: node i attends over the nodes that send to it.

    ``q``, ``k``, ``v``: (N, H, d_h); ``src``, ``dst``: (E,) long, on the same device.
    Returns (N, H, d_h): ``out_i = Σ_{j->i} softmax_j(q_i·k_j · scale) v_j``, 0 for a node with no
    incoming edge. ``scale`` defaults to ``1/sqrt(d_h)``, as ``scaled_dot_product_attention``'s.
    """
    if scale is None:
        scale = q.shape[-1] ** -0.5
    scores = (q.index_select(0, dst) * k.index_select(0, src)).sum(-1) * scale  # (E, H)
    a = segment_softmax(scores, dst, q.shape[0])  # (E, H)
    messages = a.unsqueeze(-1) * v.index_select(0, src)  # (E, H, d_h)
    return torch.zeros_like(v).index_add_(0, dst, messages)
