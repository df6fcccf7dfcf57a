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

The same primitives carry every aggregator of the encoder family (``model.impl=torch_sparse``, and
``impl=sparse`` wherever DGL cannot put its graphs on the model's device, ``engine/placement.py``): a
batch's edges become an :class:`EdgeGraph` (index tensors on the model's device), and each aggregator's
``forward_edges(h, eg)`` writes its ``forward``'s lines with them in place of DGL's built-ins:

  DGL                                     here
  g.apply_edges(fn.u_dot_v / u_add_v)     eg.src_of(x), eg.dst_of(x): gather at each edge's sender / receiver
  edge_softmax(g, s)                      eg.softmax(s): :func:`segment_softmax`
  update_all(..., fn.sum | mean | max)    eg.sum(m), eg.mean(m), eg.max(m): :func:`segment_sum` and kin
  g.in_degrees(), g.out_degrees()         eg.in_degrees(), eg.out_degrees()

with DGL's conventions where a node receives nothing: 0 for the sum, the mean and the max.
tests/models/test_torch_message_passing.py checks every aggregator equals its DGL path.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import dgl
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
    total = segment_sum(weights, dst, num_nodes)
    return weights / total.gather(0, index)


def segment_sum(messages: torch.Tensor, dst: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Σ of ``messages`` (E, ...) at each receiver ``dst`` (E,): (num_nodes, ...), 0 where none arrives (DGL's ``fn.sum``)."""
    return messages.new_zeros((num_nodes,) + messages.shape[1:]).index_add_(0, dst, messages)


def segment_max(messages: torch.Tensor, dst: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Element-wise max of ``messages`` (E, ...) at each receiver: (num_nodes, ...), 0 where none arrives (DGL's
    ``fn.max``). Tied maxima share the gradient evenly (``amax``); DGL gives it to one of them."""
    index = dst.view((-1,) + (1,) * (messages.dim() - 1)).expand_as(messages)
    base = messages.new_zeros((num_nodes,) + messages.shape[1:])
    return base.scatter_reduce(0, index, messages, reduce="amax", include_self=False)


@dataclass
class EdgeGraph:
    """A batch's edges ``src[e] -> dst[e]`` as index tensors on the model's device, in DGL's edge order (edge
    ids), so weights per edge line up with the DGL path's. What stock-torch message passing reads."""

    src: torch.Tensor  # (E,) long: each edge's sender j
    dst: torch.Tensor  # (E,) long: each edge's receiver i
    num_nodes: int
    etype: torch.Tensor | None = (
        None  # (E,) long: the type of each edge (data/graphs/edges.py), when the graph has them
    )

    @classmethod
    def of(cls, g: dgl.DGLGraph, device) -> EdgeGraph:
        """The edges of the (batched) DGL graph ``g``, wherever it lives, moved to ``device``."""
        src, dst = (e.to(device) for e in g.edges())
        etype = g.edata["etype"].to(device) if "etype" in g.edata else None
        return cls(src, dst, g.num_nodes(), etype)

    def src_of(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) -> (E, ...): each edge's sender's row (DGL's ``u``)."""
        return x.index_select(0, self.src)

    def dst_of(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) -> (E, ...): each edge's receiver's row (DGL's ``v``)."""
        return x.index_select(0, self.dst)

    def softmax(self, scores: torch.Tensor) -> torch.Tensor:
        """(E, ...) -> (E, ...): normalised over each receiver's incoming edges (DGL's ``edge_softmax``)."""
        return segment_softmax(scores, self.dst, self.num_nodes)

    def sum(self, messages: torch.Tensor) -> torch.Tensor:
        """(E, ...) -> (N, ...): Σ at each receiver."""
        return segment_sum(messages, self.dst, self.num_nodes)

    def mean(self, messages: torch.Tensor) -> torch.Tensor:
        """(E, ...) -> (N, ...): the mean at each receiver, 0 where none arrives."""
        count = self.in_degrees().clamp(min=1).to(messages.dtype)
        return self.sum(messages) / count.view((-1,) + (1,) * (messages.dim() - 1))

    def max(self, messages: torch.Tensor) -> torch.Tensor:
        """(E, ...) -> (N, ...): the element-wise max at each receiver, 0 where none arrives."""
        return segment_max(messages, self.dst, self.num_nodes)

    @cached_property
    def _in_degrees(self) -> torch.Tensor:
        return torch.bincount(self.dst, minlength=self.num_nodes)

    @cached_property
    def _out_degrees(self) -> torch.Tensor:
        return torch.bincount(self.src, minlength=self.num_nodes)

    def in_degrees(self) -> torch.Tensor:
        """(N,) long: edges each node receives."""
        return self._in_degrees

    def out_degrees(self) -> torch.Tensor:
        """(N,) long: edges each node sends."""
        return self._out_degrees


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
    return segment_sum(messages, dst, v.shape[0])
