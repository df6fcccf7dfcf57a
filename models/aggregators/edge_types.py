"""Messages that know where they come from: per-type weights for the attention-free aggregators.

With ``edge_types=T`` (``model.edge_types=true``) every edge carries a type in ``edata['etype']``
(``data/graphs/edges.py``: self, from a child, from the head, from the left, from the right, ``<cls>``);
the dense twin has it as ``DenseGraph.etype`` (B, n, n). Each aggregator reads it in the way that fits it:

  GCN, sum, mean, max   one channel per type, then one weight per type (R-GCN, Schlichtkrull et
                        al., 2018):  h_i' = Σ_t W_t · Agg_{j∈N_t(i)} h_j      (the helpers below)
  Transformer           type vectors added to keys and values (Shaw et al., 2018):
                        a_ij ∝ exp(q_i·(k_j + r^K_t)/sqrt(d_h)),  h_i' = O Σ_j a_ij (v_j + r^V_t)
                        (``transformer.py``'s ``typed_keys``, ``attention.py``'s ``typed_values``)
  GAT                   a per-type, per-head score bias (``gat.py``'s ``typed_scores``) and the same
                        value vectors r^V_t

so a node can tell its children's sum from its head's message: with ``sum`` that is a GIN update
that counts children and knows direction. W_t is the t-th (d, d) block of one ``nn.Linear(T d, d)``.
"""

from __future__ import annotations

import dgl
import dgl.function as fn
import torch
import torch.nn.functional as F
from torch import nn

from models.dense import DenseGraph
from models.torch_mp import EdgeGraph


def type_onehot(etype: torch.Tensor, num_types: int, dtype) -> torch.Tensor:
    """(..., T) float one-hot of edge types."""
    return F.one_hot(etype, num_types).to(dtype)


def typed_linear_sum(
    g: dgl.DGLGraph, x: torch.Tensor, linear: nn.Linear, num_types: int, edge_weight: torch.Tensor | None = None
) -> torch.Tensor:
    """Σ_t W_t · Σ_{j∈N_t(i)} w_ji x_j (no bias), with W_t the t-th (d, d) block of ``linear``'s (d, T d) weight.

    The same as ``linear`` applied to T per-type channels of sums (R-GCN's form; the dense twins
    compute it that way), but each node is projected once per type and an edge carries one (d,)
    message, not T of them."""
    src, _ = g.edges()
    with g.local_scope():
        g.edata["m"] = typed_messages(x, linear, num_types, src, g.edata["etype"], edge_weight)  # (E, d)
        g.update_all(fn.copy_e("m", "m"), fn.sum("m", "agg"))
        return g.dstdata["agg"]


def typed_linear_sum_edges(
    eg: EdgeGraph, x: torch.Tensor, linear: nn.Linear, num_types: int, edge_weight: torch.Tensor | None = None
) -> torch.Tensor:
    """:func:`typed_linear_sum` in stock torch, on the edges ``eg`` (``models/torch_mp.py``)."""
    return eg.sum(typed_messages(x, linear, num_types, eg.src, eg.etype, edge_weight))


def typed_messages(
    x: torch.Tensor,
    linear: nn.Linear,
    num_types: int,
    src: torch.Tensor,
    etype: torch.Tensor,
    edge_weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """(E, d): w_e W_type(e) x_src(e) on each edge, each node projected once per type."""
    d_out = linear.weight.shape[0]
    per_type = torch.einsum("ni,oti->nto", x, linear.weight.view(d_out, num_types, -1))  # (N, T, d) W_t x_j
    msg = per_type[src, etype]  # (E, d) W_type(e) x_src
    return msg if edge_weight is None else msg * edge_weight.unsqueeze(-1)


def typed_adjacency(dg: DenseGraph, num_types: int, dtype) -> torch.Tensor:
    """(B, T, n, n): the adjacency split by edge type."""
    onehot = type_onehot(dg.etype, num_types, dtype)  # (B, n, n, T)
    return onehot.permute(0, 3, 1, 2) * dg.adjacency().unsqueeze(1).to(dtype)
