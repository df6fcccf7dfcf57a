# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Part 1 — Attention is message passing
#
# A self-attention layer (Vaswani et al., 2017) updates token *i* from every token *j*:
#
# $$a_{ij} = \operatorname{softmax}_j\Big(\frac{q_i \cdot k_j}{\sqrt{d_h}}\Big), \qquad h_i' = \sum_j a_{ij}\, v_j,$$
#
# with $q = W_Q h$, $k = W_K h$, $v = W_V h$. Read it as a graph neural network layer (Joshi, 2020,
# *Transformers are Graph Neural Networks*) and you get three steps along the edges $j \to i$ of a graph:
#
# 1. **score** every edge: $s_{ji} = k_j \cdot q_i / \sqrt{d_h}$ (a message that depends on both ends);
# 2. **normalise** the scores over the edges that arrive at $i$: a softmax per receiving node;
# 3. **aggregate**: each node sums its neighbours' values, weighted by those normalised scores.
#
# On the **complete** graph (every token receives from every token, itself included) this is exactly
# self-attention. On any other graph it is attention *masked* to the graph's edges.
#
# This notebook checks both statements numerically, first with a ten-line DGL function written here
# and then with the repository's `models.aggregators.DotProductAttention`.

# %%
from _setup import ROOT  # tutorials/_setup.py: the repository importable, DGL on PyTorch, offline

import dgl
import dgl.function as fn
import torch
import torch.nn.functional as F
from dgl.nn.functional import edge_softmax

from data.graphs import complete_edges, tree_edges
from data.listops import parse
from models.aggregators import DotProductAttention
from models.dense import to_dense

torch.manual_seed(0)
TOL = 1e-5
print(f"repository: {ROOT.name} | torch {torch.__version__} | dgl {dgl.__version__}")

# %% [markdown]
# ## 1. Attention in three DGL built-ins
#
# DGL stores a feature per node (`ndata`, or `srcdata`/`dstdata` for the two ends of an edge) and per
# edge (`edata`). The three steps map onto three built-ins:
#
# | step | DGL | computes, on the edge $j \to i$ |
# |---|---|---|
# | score | `g.apply_edges(fn.u_dot_v("k", "q", "s"))` | $s_{ji} = k_j \cdot q_i$ (`u` = source, `v` = destination) |
# | normalise | `edge_softmax(g, s)` | softmax over the edges that enter $i$ |
# | aggregate | `g.update_all(fn.u_mul_e("v", "a", "m"), fn.sum("m", "out"))` | $\sum_j a_{ij} v_j$ |
#
# Features carry a head axis, shape `(nodes, heads, d_h)`, so every head is handled at once: `u_dot_v`
# returns one score per edge and head, `(edges, heads, 1)`.


# %%
def attention_by_message_passing(g: dgl.DGLGraph, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """Multi-head attention along the edges of ``g``. q, k, v: (N, H, d_h) -> (N, H, d_h) and the
    attention weights per edge (E, H)."""
    with g.local_scope():  # nothing written here leaks into g
        g.srcdata["k"], g.srcdata["v"] = k, v  # what a sender j offers
        g.dstdata["q"] = q / q.shape[-1] ** 0.5  # what a receiver i asks, pre-scaled by 1/sqrt(d_h)
        g.apply_edges(fn.u_dot_v("k", "q", "s"))  # (E, H, 1): k_j . q_i / sqrt(d_h)
        g.edata["a"] = edge_softmax(g, g.edata["s"])  # (E, H, 1): sums to 1 over i's incoming edges
        g.update_all(fn.u_mul_e("v", "a", "m"), fn.sum("m", "out"))  # (N, H, d_h): sum_j a_ij v_j
        return g.dstdata["out"], g.edata["a"].squeeze(-1)


n, heads, d_h = 6, 2, 4
src, dst = complete_edges(n)  # every (j, i) pair, self loops included: n^2 edges
g = dgl.graph((src, dst), num_nodes=n)
q, k, v = (torch.randn(n, heads, d_h) for _ in range(3))
out_mp, a_mp = attention_by_message_passing(g, q, k, v)
print(f"complete graph on {n} tokens: {g.num_edges()} edges (= n^2), output {tuple(out_mp.shape)}")
row_sums = dgl.ops.copy_e_sum(g, a_mp)  # (N, H): sum of the weights on the edges entering each node
assert torch.allclose(row_sums, torch.ones(n, heads), atol=TOL)
print("attention weights entering each node sum to 1 (head 0):", row_sums[:, 0].numpy().round(4).tolist())

# %% [markdown]
# ## 2. The same numbers as `scaled_dot_product_attention`
#
# PyTorch's fused attention wants `(batch, heads, n, d_h)`. Nothing else changes: same q, k, v, same
# scale. The two must agree to float32 round-off.


# %%
def to_sdpa_layout(x: torch.Tensor) -> torch.Tensor:
    """(n, H, d_h) -> (1, H, n, d_h)."""
    return x.transpose(0, 1).unsqueeze(0)


out_sdpa = F.scaled_dot_product_attention(to_sdpa_layout(q), to_sdpa_layout(k), to_sdpa_layout(v))
out_sdpa = out_sdpa.squeeze(0).transpose(0, 1)  # back to (n, H, d_h)
gap = (out_mp - out_sdpa).abs().max().item()
assert torch.allclose(out_mp, out_sdpa, atol=TOL), gap
print(f"message passing on the complete graph == scaled_dot_product_attention (max |diff| {gap:.1e})")

# %% [markdown]
# The attention matrix is just the edge weights laid out as an $n \times n$ table: row $i$ holds the
# weights of the edges that enter $i$. `g.edges()` gives each edge's (source $j$, destination $i$).


# %%
def attention_matrix(g: dgl.DGLGraph, a: torch.Tensor) -> torch.Tensor:
    """Edge weights (E, H) -> per-head matrices (H, n, n) with A[h, i, j] = a_ij; 0 where no edge."""
    A = torch.zeros(a.shape[1], g.num_nodes(), g.num_nodes())
    e_src, e_dst = g.edges()
    A[:, e_dst, e_src] = a.T
    return A


A = attention_matrix(g, a_mp)
A_ref = torch.softmax(to_sdpa_layout(q)[0] @ to_sdpa_layout(k)[0].transpose(-1, -2) / d_h**0.5, dim=-1)
assert torch.allclose(A, A_ref, atol=TOL)
print("head 0 attention matrix, rebuilt from the edge weights (rows sum to 1):")
print(A[0].numpy().round(3))

# %% [markdown]
# ## 3. The repository's layer is the same computation
#
# `DotProductAttention` (in `models/aggregators/transformer.py`) is the layer the Transformer model uses. It holds
# $W_Q, W_K, W_V$ and an output projection $O$ that mixes the concatenated heads:
# $h_i' = O\,[\text{head}_1; \dots; \text{head}_H]_i$. With its own weights, our function plus $O$ must
# reproduce it, and so must its dense twin `forward_dense`, which runs one fused attention call on a
# padded batch (part 4 is about why there are two implementations).

# %%
d = heads * d_h
layer = DotProductAttention(d, num_heads=heads).eval()
h = torch.randn(n, d)
with torch.no_grad():
    split = (n, heads, d_h)
    q_l, k_l, v_l = layer.query(h).view(split), layer.key(h).view(split), layer.value(h).view(split)
    ours = layer.out(attention_by_message_passing(g, q_l, k_l, v_l)[0].flatten(1))
    repo_sparse = layer(g, h)
    dg = to_dense(g, "cpu")
    repo_dense = dg.unpad(layer.forward_dense(dg.pad(h), dg))
for name, other in (("DotProductAttention (DGL)", repo_sparse), ("DotProductAttention.forward_dense", repo_dense)):
    gap = (ours - other).abs().max().item()
    assert torch.allclose(ours, other, atol=TOL), (name, gap)
    print(f"tutorial function + O == {name} (max |diff| {gap:.1e})")

# %% [markdown]
# ## 4. Another graph, masked attention
#
# Nothing in the function assumed the complete graph. Give it a tree and each token attends only to
# its parent, its children and itself. Here the tree is the gold parse of the ListOps expression
# `[MAX 2 9 [MIN 4 7 ] 0 ]` (Nangia & Bowman, 2018): an operator heads its arguments and its `]`.
#
# Masked attention computes every score and then sets the non-edges to $-\infty$ before the
# softmax; message passing never computes them. The results must agree.

# %%
tokens = "[MAX 2 9 [MIN 4 7 ] 0 ]".split()
value, heads_of, depth = parse(tokens)
print(f"{' '.join(tokens)}  = {value}, depth {depth}")
for i, (tok, head) in enumerate(zip(tokens, heads_of)):
    print(f"  {i:2d} {tok:5s} <- parent {head:2d} {tokens[head] if head >= 0 else '(root)'}")

n_tree = len(tokens)
t_src, t_dst = tree_edges(heads_of)  # parent <-> child, plus self loops
tree = dgl.graph((t_src, t_dst), num_nodes=n_tree)
q, k, v = (torch.randn(n_tree, heads, d_h) for _ in range(3))
out_tree, _ = attention_by_message_passing(tree, q, k, v)

mask = torch.zeros(n_tree, n_tree, dtype=torch.bool)
mask[t_dst, t_src] = True  # mask[i, j]: i may attend to j, i.e. there is an edge j -> i
out_masked = F.scaled_dot_product_attention(to_sdpa_layout(q), to_sdpa_layout(k), to_sdpa_layout(v), attn_mask=mask)[
    0
].transpose(0, 1)
gap = (out_tree - out_masked).abs().max().item()
assert torch.allclose(out_tree, out_masked, atol=TOL), gap
print(
    f"tree: {tree.num_edges()} edges instead of {n_tree**2}; message passing == masked attention (max |diff| {gap:.1e})"
)
print("the mask (1 = attends), row i = token i:")
for i in range(n_tree):
    print(f"  {tokens[i]:5s} " + " ".join("1" if m else "." for m in mask[i].tolist()))

# %% [markdown]
# Drawn as matrices (head 0, same queries and keys): on the complete graph every token spreads its
# weight over all nine tokens; on the tree it goes only to the edges the parse allows, and every other
# entry is exactly zero because that edge was never scored.

# %%
import matplotlib.pyplot as plt  # noqa: E402

full = dgl.graph(complete_edges(n_tree), num_nodes=n_tree)
fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
for ax, (title, graph) in zip(axes, (("complete graph", full), ("ListOps parse tree", tree))):
    matrix = attention_matrix(graph, attention_by_message_passing(graph, q, k, v)[1])[0]  # head 0
    assert torch.allclose(matrix.sum(1), torch.ones(n_tree), atol=TOL)  # a softmax per receiving node
    if graph is tree:
        assert (matrix[~mask] == 0).all()  # off the tree, nothing
    ax.imshow(matrix, cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(n_tree), tokens, rotation=90)
    ax.set_yticks(range(n_tree), tokens)
    ax.set_xlabel("sender j")
    ax.set_ylabel("receiver i")
    ax.set_title(f"{title}: {graph.num_edges()} edges")
fig.tight_layout()
print("attention rows sum to 1 on both graphs; off-tree weights are 0")

# %% [markdown]
# ## 5. Batches are block-diagonal graphs
#
# `dgl.batch` glues several graphs into one graph with no edges between them, so sentences of
# different lengths need no padding: every softmax already runs over one sentence only. The dense
# equivalent is padding plus a block mask (part 4 measures what that costs).

# %%
lengths = [3, 5]
batch = dgl.batch([dgl.graph(complete_edges(m), num_nodes=m) for m in lengths])
N = batch.num_nodes()
q, k, v = (torch.randn(N, heads, d_h) for _ in range(3))
out_batch, _ = attention_by_message_passing(batch, q, k, v)
offset = 0
for m in lengths:
    part = slice(offset, offset + m)
    alone = F.scaled_dot_product_attention(to_sdpa_layout(q[part]), to_sdpa_layout(k[part]), to_sdpa_layout(v[part]))
    assert torch.allclose(out_batch[part], alone[0].transpose(0, 1), atol=TOL)
    offset += m
print(
    f"a batch of sentences of lengths {lengths}: {N} nodes, {batch.num_edges()} edges "
    f"(= {' + '.join(f'{m}^2' for m in lengths)}); each sentence equals attention on its own"
)

# %% [markdown]
# ## What to take away
#
# * A Transformer layer is a message-passing layer whose graph is complete: $n^2$ edges per sentence.
# * Swap the graph and you get a sparse or structured Transformer; swap the score function and you get
#   another GNN (part 2: GCN and GAT).
# * `tests/models/test_aggregators.py` checks the same equivalences on larger random batches.
#
# Next: `02_one_encoder_three_aggregators.py`.

# %%
print("part 1 done: all equivalence checks passed")
