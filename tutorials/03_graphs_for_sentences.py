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
# # Part 3 — Graphs for sentences
#
# If a Transformer is a GNN on the complete graph (part 1), the complete graph is a *choice*. A
# sentence of $n$ tokens can be given any set of edges, and each set is a different inductive bias:
#
# | `graph=` | token $i$ receives from | stands for |
# |---|---|---|
# | `complete` | every token | the Transformer (Vaswani et al., 2017) |
# | `tree` | its parent and children in the syntax tree | Tree-LSTM-like structure |
# | `window` | tokens at most `window` positions away | a convolution / local attention |
# | `knn` | its `k` nearest tokens in the model's current feature space | a graph the model learns |
# | `none` | only itself | a bag of tokens, the no-interaction baseline |
#
# This part builds each of them with `data.graphs.GraphConstruction` for a ListOps expression and an
# English sentence, counts edges, draws the adjacency matrices, and then looks at the other way to
# give a model structure: **positional encodings computed from a graph** (Dwivedi et al., 2020).

# %%
from _setup import OUT, ROOT  # tutorials/_setup.py: the repository importable, DGL on PyTorch, offline

import math

import matplotlib.pyplot as plt
import torch

from data.graphs import GRAPHS, GraphConstruction, laplacian_pe, random_walk_pe
from data.listops import generate, parse
from data.vocab import Vocab
from models.encoder import sinusoidal_encoding
from models.knn import rebuild

torch.manual_seed(0)
print("graph constructions:", ", ".join(GRAPHS), "| figures go to", OUT.relative_to(ROOT))

# %% [markdown]
# ## 1. Two sentences with their trees
#
# A ListOps expression (Nangia & Bowman, 2018) carries its gold tree: `data.listops.parse` returns
# its value and, for each token, the index of its parent (`-1` at the root). An operator heads its
# arguments and its closing `]`. `data.listops.generate` produces such examples from a seed.
#
# For English, tagnn gets the tree from spaCy's dependency parser (`data/text.py`). To keep this
# notebook free of that dependency, the parse of *The cat sat on the mat .* is written out by hand,
# in the style of spaCy's English models: *sat* is the root, *on* hangs from *sat*, *mat* from *on*.

# %%
listops_example = next(generate(1, seed=4, max_length=18, min_length=12))
listops_tokens = listops_example["tokens"]
value, listops_heads, depth = parse(listops_tokens)
assert listops_heads == listops_example["heads"] and value == listops_example["label"]

sentence_tokens = ["The", "cat", "sat", "on", "the", "mat", "."]
sentence_heads = [1, 2, -1, 2, 5, 3, 2]  # The<-cat, cat<-sat, sat=root, on<-sat, the<-mat, mat<-on, .<-sat

SENTENCES = {
    "listops": (listops_tokens, listops_heads),
    "english": (sentence_tokens, sentence_heads),
}
vocab = Vocab.build(tokens for tokens, _ in SENTENCES.values())
print(f"listops: {' '.join(listops_tokens)}  = {value} (depth {depth}, {len(listops_tokens)} tokens)")
print(f"english: {' '.join(sentence_tokens)}  ({len(sentence_tokens)} tokens)")
for name, (tokens, heads) in SENTENCES.items():
    arcs = ", ".join(f"{tokens[h]}->{t}" for t, h in zip(tokens, heads) if h >= 0)
    print(f"  {name} tree (head->dependent): {arcs}")

# %% [markdown]
# ## 2. Five graphs per sentence
#
# `GraphConstruction(name=...)` is called with token ids and heads and returns a DGL graph. Edges are
# directed, `src -> dst` meaning *dst receives from src*. Every construction adds self loops by default
# (`self_loops=True`), so a node keeps its own state; `none` has nothing but them.
#
# `knn` is the odd one out: its edges depend on the model's features at each layer, so the graph built
# from the data has none, and the model calls `models.knn.rebuild(construction, g, h)` in its forward pass. Here
# random features stand in for a layer's `h`.
#
# The density $|E| / n^2$ is the share of all token pairs that are edges: 1 for the complete graph,
# about $3/n$ for a tree with self loops. Part 4 shows why it decides which implementation is faster.


# %%
def build_graph(name: str, tokens: list[str], heads: list[int]):
    construction = GraphConstruction(name=name, window=2, k=3)
    g = construction(vocab.encode(tokens), heads)
    if construction.dynamic:  # knn: edges from (here random) node features, as the model does per layer
        g = rebuild(construction, g, torch.randn(g.num_nodes(), 16))
    return g


def adjacency(g) -> torch.Tensor:
    """(n, n) with A[i, j] = 1 for an edge j -> i: row i = whom token i listens to."""
    a = torch.zeros(g.num_nodes(), g.num_nodes())
    src, dst = g.edges()
    a[dst, src] = 1.0
    return a


graphs = {(s, name): build_graph(name, *SENTENCES[s]) for s in SENTENCES for name in GRAPHS}
print(f"{'sentence':9s} {'graph':9s} {'n':>3s} {'edges':>6s} {'density':>8s} {'in-degree min/max':>18s}")
for (s, name), g in graphs.items():
    n = g.num_nodes()
    deg = g.in_degrees()
    print(
        f"{s:9s} {name:9s} {n:3d} {g.num_edges():6d} {g.num_edges() / n**2:8.3f} {int(deg.min()):>9d}/{int(deg.max())}"
    )

# %% [markdown]
# The matrices below are the masks that a dense, masked attention would use (part 1, section 4).

# %%
fig, axes = plt.subplots(len(SENTENCES), len(GRAPHS), figsize=(3.0 * len(GRAPHS), 3.2 * len(SENTENCES)))
for row, (s, (tokens, _)) in enumerate(SENTENCES.items()):
    for col, name in enumerate(GRAPHS):
        ax = axes[row][col]
        g = graphs[(s, name)]
        ax.imshow(adjacency(g).numpy(), cmap="Greys", vmin=0, vmax=1)
        ax.set_title(f"{s}: {name} ({g.num_edges()} edges)", fontsize=9)
        ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=6)
        ax.set_yticks(range(len(tokens)), tokens, fontsize=6)
axes[0][0].set_ylabel("receiver i")
axes[-1][0].set_xlabel("sender j")
fig.tight_layout()
adjacency_png = OUT / "03_adjacency.png"
fig.savefig(adjacency_png, dpi=100)
print(f"wrote {adjacency_png.relative_to(ROOT)}")

# %% [markdown]
# The tree is easier to read as arcs over the tokens: each arc joins a token to its head.

# %%
fig, axes = plt.subplots(len(SENTENCES), 1, figsize=(9, 2.2 * len(SENTENCES)))
for ax, (s, (tokens, heads)) in zip(axes, SENTENCES.items()):
    for child, head in enumerate(heads):
        if head < 0:
            ax.annotate("root", (child, 0), (child, 0.9), ha="center", arrowprops=dict(arrowstyle="->"))
            continue
        mid, half = (child + head) / 2, abs(child - head) / 2
        t = torch.linspace(0, math.pi, 40)
        ax.plot((mid + half * torch.cos(t)).numpy(), (0.15 * half * torch.sin(t)).numpy(), color="tab:blue")
    for i, tok in enumerate(tokens):
        ax.text(i, -0.15, tok, ha="center", va="top", fontsize=9)
    ax.set_xlim(-0.8, len(tokens) - 0.2)
    ax.set_ylim(-0.6, 1.2)
    ax.axis("off")
    ax.set_title(f"{s}: gold/parsed tree", fontsize=9)
fig.tight_layout()
tree_png = OUT / "03_trees.png"
fig.savefig(tree_png, dpi=100)
print(f"wrote {tree_png.relative_to(ROOT)}")

# %% [markdown]
# ## 3. Structure as a positional encoding
#
# Instead of restricting *who talks to whom*, a graph can be handed to the model as a feature: each
# token gets a vector that describes where it sits in the graph, and attention stays complete. This is
# how Graph Transformers see structure (Dwivedi & Bresson, 2021; the Laplacian encoding is benchmarked in
# Dwivedi et al., 2020). tagnn has two such encodings, both with
# the signature `(src, dst, n, k) -> (n, k)`, computed on the undirected graph without self loops:
#
# * `laplacian_pe`: the eigenvectors of the normalised Laplacian $L = I - D^{-1/2} A D^{-1/2}$ with
#   the $k$ smallest non-trivial eigenvalues, the graph's smoothest "vibration modes". Their sign is
#   arbitrary; the model flips it at random while training (`model.positional=lap_pe`).
# * `random_walk_pe`: the probability that a random walk returns to its start after $1..k$ steps
#   (Dwivedi et al., 2022), which has no sign ambiguity.

# %%
k = 4
tokens, heads = SENTENCES["listops"]
n = len(tokens)
tree_src = torch.tensor([i for i, h in enumerate(heads) if h >= 0])
tree_dst = torch.tensor([h for h in heads if h >= 0])
lap = laplacian_pe(tree_src, tree_dst, n, k)
rw = random_walk_pe(tree_src, tree_dst, n, k)
print(
    f"{'token':6s} "
    + " ".join(f"lap{j}" for j in range(1, k + 1))
    + "   "
    + " ".join(f" rw{j}" for j in range(1, k + 1))
)
for i, tok in enumerate(tokens):
    print(
        f"{tok:6s} "
        + " ".join(f"{x:+.2f}" for x in lap[i].tolist())
        + "   "
        + " ".join(f"{x:.2f}" for x in rw[i].tolist())
    )
assert torch.all(rw[:, 0] == 0), "no self loops: a walk cannot be back after one step"
print("random_walk_pe column 1 is 0 everywhere (no self loops); column 2 = sum over neighbours of 1/(deg_i deg_j)")

# %% [markdown]
# Two caveats show in that table. Tokens in the same place of the tree get the same random-walk
# vector (every digit under an operator looks alike), which is the point of a *structural* encoding.
# And the Laplacian columns are not unique beyond their sign: the leaves under one operator are
# interchangeable, so the Laplacian has **repeated eigenvalues**, and inside such an eigenspace any
# orthonormal basis is as good as another. The eigenvalues of this tree's normalised Laplacian:

# %%
tree_adj = torch.zeros(n, n, dtype=torch.float64)
tree_adj[tree_src, tree_dst] = tree_adj[tree_dst, tree_src] = 1.0
inv_sqrt_deg = tree_adj.sum(1).pow(-0.5)
eigenvalues = torch.linalg.eigvalsh(torch.eye(n, dtype=torch.float64) - inv_sqrt_deg[:, None] * tree_adj * inv_sqrt_deg)
rounded = [round(x, 4) + 0.0 for x in eigenvalues.tolist()]  # + 0.0 turns -0.0 into 0.0
print("eigenvalues:", rounded)
print("kept by laplacian_pe (k smallest after the trivial 0):", rounded[1 : k + 1])
repeated = {x: rounded.count(x) for x in rounded if rounded.count(x) > 1}
print("repeated:", ", ".join(f"{x} (x{c})" for x, c in repeated.items()) or "none")

# %% [markdown]
# ## 4. The chain: where Laplacian and sinusoidal encodings meet
#
# Read a sentence as a chain, $0 - 1 - \dots - (n-1)$ (`model.pe_graph=chain`). What are the Laplacian
# eigenvectors of a path?
#
# *Unnormalised* Laplacian $D - A$: the eigenvectors are exactly $\cos\big(\pi k (i + \tfrac12)/n\big)$,
# the DCT-II basis.
#
# *Normalised* Laplacian $I - D^{-1/2} A D^{-1/2}$, the one `laplacian_pe` uses: the two end nodes have
# degree 1 and the others degree 2, which changes the answer. The random-walk matrix $D^{-1}A$ has
# eigenvectors $f_k(i) = \cos\big(\pi k\, i/(n-1)\big)$ (check: at an inner node
# $\tfrac12(f(i-1) + f(i+1)) = \cos(\tfrac{\pi k}{n-1}) f(i)$, and at an end node $f(1) = \cos(\tfrac{\pi k}{n-1}) f(0)$),
# and $L$'s eigenvectors are $D^{1/2} f_k$. So each chain eigenvector is **exactly**
# $\sqrt{\deg(i)}\,\cos\big(\pi k\, i/(n-1)\big)$ up to sign and scale: a pure cosine of the position
# at every inner token, with the two end values shrunk by $1/\sqrt{2}$. It is only *approximately*
# the DCT-II cosine $\cos(\pi k (i + \tfrac12)/n)$. Both statements are checked below.

# %%
n = 12
chain_src, chain_dst = torch.arange(n - 1), torch.arange(1, n)
chain_pe = laplacian_pe(chain_src, chain_dst, n, n - 1).double()  # all n - 1 non-trivial eigenvectors
i = torch.arange(n, dtype=torch.float64)
deg = torch.full((n,), 2.0, dtype=torch.float64)
deg[0] = deg[-1] = 1.0


def abs_cosine_similarity(x: torch.Tensor, y: torch.Tensor) -> float:
    return float((x @ y).abs() / (x.norm() * y.norm()))


adj = torch.zeros(n, n, dtype=torch.float64)
adj[chain_src, chain_dst] = adj[chain_dst, chain_src] = 1.0
_, combinatorial = torch.linalg.eigh(torch.diag(adj.sum(1)) - adj)  # eigenvectors of D - A, ascending

print(
    f"{'k':>2s} {'exact: sqrt(deg) cos(pi k i/(n-1))':>36s} {'DCT-II: cos(pi k (i+1/2)/n)':>30s} {'D - A vs DCT-II':>16s}"
)
for kk in range(1, n):
    v = chain_pe[:, kk - 1]
    exact = abs_cosine_similarity(v, deg.sqrt() * torch.cos(math.pi * kk * i / (n - 1)))
    dct = abs_cosine_similarity(v, torch.cos(math.pi * kk * (i + 0.5) / n))
    dct_unnormalised = abs_cosine_similarity(combinatorial[:, kk], torch.cos(math.pi * kk * (i + 0.5) / n))
    assert exact > 1 - 1e-5, (kk, exact)
    assert dct_unnormalised > 1 - 1e-9, (kk, dct_unnormalised)
    assert dct > 0.8
    print(f"{kk:2d} {exact:36.6f} {dct:30.4f} {dct_unnormalised:16.6f}")
print("chain Laplacian eigenvectors are cosines of the position: exact as sqrt(deg) * cos, approximate as DCT-II")

# %% [markdown]
# So the Laplacian encoding of a chain is a bank of cosines of the position, the same family as the
# sinusoidal encoding of Vaswani et al. (2017), $PE(p) = (\sin \omega_m p, \cos \omega_m p)_m$. The
# family is shared; the frequencies are not:
#
# * sinusoidal: $\omega_m = 10000^{-2m/d}$, geometric, fixed, the same for every sentence length;
# * chain Laplacian: $\omega_k = \pi k/(n-1)$, linear in $k$, and they stretch with the sentence length $n$.
#
# The plot puts both side by side for $n = 12$.

# %%
sinusoidal = sinusoidal_encoding(torch.arange(n), 16)
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.2))
fine = torch.linspace(0, n - 1, 200, dtype=torch.float64)
for kk in range(1, 4):
    v = chain_pe[:, kk - 1]
    curve = torch.cos(math.pi * kk * fine / (n - 1))
    scale = v[1:-1].abs().max() / torch.cos(math.pi * kk * i[1:-1] / (n - 1)).abs().max()
    sign = torch.sign((v[1:-1] * torch.cos(math.pi * kk * i[1:-1] / (n - 1))).sum())
    left.plot(i.numpy(), v.numpy(), "o", label=f"eigenvector {kk}")
    left.plot(fine.numpy(), (sign * scale * curve).numpy(), "-", color=left.lines[-1].get_color(), alpha=0.5)
left.set(title=f"chain Laplacian (n={n}): dots, and cos(pi k i/(n-1))", xlabel="position i")
left.legend(fontsize=7)
for m in range(4):
    right.plot(sinusoidal[:, 2 * m + 1].numpy(), "o-", label=f"cos, m={m}")
right.set(title="sinusoidal encoding, cos columns (d=16)", xlabel="position p")
right.legend(fontsize=7)
fig.tight_layout()
chain_png = OUT / "03_chain_pe.png"
fig.savefig(chain_png, dpi=100)
print(f"wrote {chain_png.relative_to(ROOT)}")

# %% [markdown]
# ## What to take away
#
# * A graph construction is a hypothesis about which tokens should talk; `graph=` swaps it without
#   touching the model. The results tables of docs/essay.md test them on ListOps (the complete graph, the
#   tree, the window, kNN and no edges at full scale for the Transformer, GAT and GCN, 3 seeds each).
# * Structure can also enter as positions: `model.positional=lap_pe|random_walk_pe` with
#   `model.pe_graph=tree|chain|graph` (see `conf/experiment/positional.yaml`).
# * On a chain, Laplacian positions are cosines of the position, like the sinusoidal encoding, but
#   with length-dependent frequencies and, for the normalised Laplacian, end values scaled by
#   $1/\sqrt2$.
#
# Next: `04_hardware_lottery.py`, on what these graphs cost to run.

# %%
print(f"part 3 done: {len(graphs)} graphs built, figures in {OUT.relative_to(ROOT)}")
