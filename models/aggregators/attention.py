"""What GAT and the Transformer share: the heads, dropout on a_ij, and the hooks tools switch on.

Both compute, per head, a score s_ij on every edge j -> i, a softmax over each node's incoming
edges and a weighted sum of values; their output projection O (``self.out``, defined in each
module) mixes the concatenated heads:

    a_ij  = softmax_{j∈N(i)} s_ij
    h_i'  = O · ‖_heads Σ_{j∈N(i)} a_ij v_j

``gat.py`` and ``transformer.py`` write these lines out, each with its own s_ij and v_j. What may
change the computation without being part of the equation is a hook here, called at a fixed point
of those lines as ``x = hook(x)``, and when off it returns its input itself:

  record(a)              keeps a_ij in ``last_attention`` once ``record_attention`` is set
                         (studies/attention_syntax, tutorials/02): (E, H) sparse, (B, H, n, n) dense
  masked_heads(h)        zeroes the heads whose ``head_mask`` entry is 0 (studies/prune_heads)
  add_bias(s, bias)      adds a given score b_ij to every edge's logit (models/minilm.py's structure bias)
  typed_values(g, h)     with edge types, + Σ_j a_ij r^V_type(ij): what an edge of type t adds to its
                         value, per head (Shaw et al., 2018); ``typed_values_dense`` is its dense twin
"""

from __future__ import annotations

import dgl
import dgl.function as fn
import torch
import torch.nn.functional as F
from torch import nn

from models.dense import DenseGraph
from models.torch_mp import EdgeGraph


def add_bias(s: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """Hook: s_ij + b_ij. ``bias`` is (E, H) on edges (``s``: (E, H, 1)) or (B, H, n, n) dense; None adds nothing."""
    if bias is None:
        return s
    return s + (bias.unsqueeze(-1) if bias.dim() == 2 else bias)


class MultiHeadAttention(nn.Module):
    """Base of the attention aggregators: H heads of d_h = d / H units, dropout on a_ij, and the hooks.

    A subclass registers its O (``self.out``) first, right after this ``__init__``: parameters are
    registered, and a checkpoint's optimiser state is stored, in the order r^V, O, then its own."""

    splits_heads = True  # each head reads hidden_dim / num_heads units: num_heads must divide hidden_dim

    def __init__(self, dim: int, num_heads: int, attn_dropout: float = 0.0, edge_types: int = 0):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"model.hidden_dim={dim} must be divisible by model.num_heads={num_heads}")
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.edge_types = edge_types
        # r^V_t: what a message of type t adds to its value, per head (T, H, d_h); zero at first
        self.rel_value = nn.Parameter(torch.zeros(edge_types, num_heads, self.head_dim)) if edge_types else None
        self.attn_dropout = nn.Dropout(attn_dropout)
        self.record_attention = False  # set True to keep the weights a_ij in last_attention
        self.last_attention = None
        self.head_mask = None  # (H,) 0/1 per head: 0 silences a head (studies/prune_heads); None keeps all

    def heads(self, x: torch.Tensor) -> torch.Tensor:
        """(N, d) -> (N, H, d_h): node features split into heads, for message passing."""
        return x.view(-1, self.num_heads, self.head_dim)

    def heads_dense(self, x: torch.Tensor) -> torch.Tensor:
        """(B, n, d) -> (B, H, n, d_h): a padded batch split into heads, one n x n matrix each."""
        b, n, _ = x.shape
        return x.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

    # ---- hooks: each leaves its input as it is unless switched on ----
    def record(self, a: torch.Tensor) -> torch.Tensor:
        """``a`` itself; when ``record_attention`` is on, a detached copy is kept in ``last_attention`` too:
        (E, H) from the sparse path's (E, H, 1), (B, H, n, n) from the dense path."""
        if self.record_attention:
            self.last_attention = (a.squeeze(-1) if a.dim() == 3 else a).detach()
        return a

    def masked_heads(self, h: torch.Tensor) -> torch.Tensor:
        """``h`` (heads on dimension 1) with the heads ``head_mask`` silences zeroed."""
        if self.head_mask is None:
            return h
        shape = [1] * h.dim()
        shape[1] = self.num_heads
        return h * self.head_mask.to(h).view(shape)

    @property
    def needs_weights(self) -> bool:
        """Whether a hook reads a_ij itself (recording, typed values): then the dense path cannot be one fused kernel."""
        return bool(self.edge_types) or self.record_attention

    def typed_values(self, g: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        """h_i + Σ_j a_ij r^V_type(ij), with a_ij in ``g.edata['a']`` (E, H, 1); ``h`` (N, H, d_h)."""
        if not self.edge_types:
            return h
        g.edata["rv"] = g.edata["a"] * self.rel_value[g.edata["etype"]]  # (E, H, d_h)
        g.update_all(fn.copy_e("rv", "m"), fn.sum("m", "rel"))
        return h + g.dstdata["rel"]

    def typed_values_edges(self, eg: EdgeGraph, h: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """:meth:`typed_values` in stock torch: h_i + Σ_j a_ij r^V_type(ij), ``a`` (E, H, 1), ``h`` (N, H, d_h)."""
        if not self.edge_types:
            return h
        return h + eg.sum(a * self.rel_value[eg.etype])  # (E, H, d_h) summed at each receiver

    def typed_values_dense(self, h: torch.Tensor, a: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        """``typed_values`` on a padded batch: the attention mass per type (B, H, n, T), times r^V_t."""
        if not self.edge_types:
            return h
        mass = torch.einsum("bhij,bijt->bhit", a, F.one_hot(dg.etype, self.edge_types).to(a.dtype))
        return h + torch.einsum("bhit,thd->bhid", mass, self.rel_value)

    def typed_per_pair(self, per_type: torch.Tensor, dg: DenseGraph) -> torch.Tensor:
        """(B, H, n, T) per receiving node and type -> (B, H, n, n) per pair, by the pair's type."""
        index = dg.etype.unsqueeze(1).expand(-1, per_type.shape[1], -1, -1)  # (B, H, n, n)
        return per_type.gather(-1, index)
