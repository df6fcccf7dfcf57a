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
# # Part 2 — One encoder, three aggregators
#
# Part 1 showed that attention is a way of *aggregating* messages along a graph's edges. GCN
# (Kipf & Welling, 2017) and GAT (Veličković et al., 2018) are the same kind of layer: they only
# weigh the neighbours differently.
#
# | aggregator | weight node $i$ gives neighbour $j$ | set by |
# |---|---|---|
# | GCN | $1/\sqrt{\deg(i)\,\deg(j)}$ | the graph alone |
# | GAT | $\operatorname{softmax}_j \operatorname{LeakyReLU}(a_{dst}\cdot Wh_i + a_{src}\cdot Wh_j)$ | learned, additive |
# | Transformer | $\operatorname{softmax}_j (W_Q h_i \cdot W_K h_j/\sqrt{d_h})$ | learned, dot product |
# | sum / mean / max | 1, $1/\deg(i)$, element-wise max | nothing: content-blind |
#
# Everything around the aggregator is shared (Joshi, 2020): token embedding + positional encoding,
# then $L$ blocks of *residual aggregation* and *residual feed-forward* with LayerNorm, then a
# readout and a classifier. In tagnn that is `models.encoder.GraphEncoder`, and the aggregator is
# one constructor argument, a key of `models.aggregators.AGGREGATORS`.

# %%
from _setup import ROOT  # noqa: F401  tutorials/_setup.py: the repository importable, DGL on PyTorch, offline

import dgl
import torch

from data.graphs import GraphConstruction
from data.listops import NUM_CLASSES, generate
from data.vocab import Vocab
from models.aggregators import AGGREGATORS
from models.encoder import GraphEncoder
from models.registry import yaml_config

torch.manual_seed(0)
TOL = 1e-5
print("aggregators in models.aggregators.AGGREGATORS:", ", ".join(AGGREGATORS))

# %% [markdown]
# ## 1. One batch of ListOps sentences
#
# Six short generated ListOps expressions, turned into their gold trees (`graph=tree`) and batched.
# `GraphConstruction` gives every node its token id (`tok`), position (`pos`) and whether it is the
# root (`root`); part 3 looks at the constructions in detail.

# %%
examples = list(generate(6, seed=1, max_length=16))
vocab = Vocab.build(ex["tokens"] for ex in examples)
tree = GraphConstruction(name="tree")
complete = GraphConstruction(name="complete")


def make_batch(construction: GraphConstruction) -> dgl.DGLGraph:
    return dgl.batch([construction(vocab.encode(ex["tokens"]), ex["heads"]) for ex in examples])


batch = make_batch(tree)
for ex in examples:
    print(f"  {' '.join(ex['tokens']):40s} = {ex['label']}")
print(f"tree batch: {batch.batch_size} graphs, {batch.num_nodes()} nodes, {batch.num_edges()} edges")

# %% [markdown]
# ## 2. The same encoder with every aggregator
#
# Small sizes (d = 32, 2 layers, 4 heads) keep this fast. The parameter counts differ only by the
# aggregator's own weights: one $d \times d$ linear map for GCN and the pooling aggregators;
# $W$ plus two attention vectors per head plus $O$ for GAT; $W_Q, W_K, W_V, O$ for the Transformer.

# %%
SIZES = dict(hidden_dim=32, num_layers=2, num_heads=4, dropout=0.0)


def build(name: str, construction: GraphConstruction, impl: str = "sparse") -> GraphEncoder:
    torch.manual_seed(0)  # the same initial weights for the shared parts
    # the shared encoder's keys (conf/encoder/default.yaml, as conf/model/transformer.yaml has them) with this
    # aggregator and SIZES over them: only the aggregator differs between the models
    config = yaml_config("transformer", name=name, impl=impl, dense_min_density=0.0, **SIZES)
    return GraphEncoder(config, len(vocab), NUM_CLASSES, construction).eval()


models = {name: build(name, tree) for name in AGGREGATORS}
shared = None
print(f"{'aggregator':12s} {'parameters':>10s} {'in aggregators':>15s} {'logits':>10s}")
for name, model in models.items():
    total = sum(p.numel() for p in model.parameters())
    in_agg = sum(p.numel() for block in model.blocks for p in block.aggregator.parameters())
    shared = total - in_agg if shared is None else shared
    assert total - in_agg == shared, "everything outside the aggregator is the same module"
    with torch.no_grad():
        logits = model(batch)
    print(f"{name:12s} {total:10d} {in_agg:15d} {str(tuple(logits.shape)):>10s}")
print(f"every model shares the same {shared} parameters outside its aggregators")

# %% [markdown]
# ## 3. How a node weighs its neighbours
#
# Take the root operator of the deepest expression and list what it receives in the first layer.
# GCN's weights come from degrees alone, computed here from the batch. The attention models record
# their weights when asked: set `record_attention = True` on an aggregator and it keeps the
# softmax output in `last_attention`, one row per edge and one column per head.
#
# The models are untrained, so the attention weights below are what random initial weights give; it
# is their *form* that matters: non-negative and summing to 1 over the neighbours, and different per
# head. Training shapes them (docs/essay.md's `experiment=neural_syntax` asks whether a trained
# Transformer's attention finds the tree).

# %%
pick = max(range(len(examples)), key=lambda b: (examples[b]["depth"], len(examples[b]["tokens"])))
offset = int(batch.batch_num_nodes()[:pick].sum())
tokens = examples[pick]["tokens"]
node = offset + examples[pick]["heads"].index(-1)  # the root, as a node id of the batch
senders, _, eids = batch.in_edges(node, form="all")

weights = {}
in_deg, out_deg = batch.in_degrees().float(), batch.out_degrees().float()
weights["gcn"] = (in_deg[node] * out_deg[senders]).pow(-0.5)
weights["sum"] = torch.ones(len(senders))
weights["mean"] = torch.full((len(senders),), 1.0 / len(senders))
for name in ("gat", "transformer"):
    agg = models[name].blocks[0].aggregator
    agg.record_attention = True
    with torch.no_grad():
        models[name](batch)
    weights[name] = agg.last_attention[eids]  # (neighbours, heads)
    agg.record_attention = False

print(f"expression: {' '.join(tokens)}")
print(f"node {tokens[node - offset]!r} (position {node - offset}) receives from {len(senders)} nodes:")
columns = {  # (neighbours, 1) for a single weight, (neighbours, heads) for attention
    "sum": weights["sum"][:, None],
    "mean": weights["mean"][:, None],
    "gcn": weights["gcn"][:, None],
    "gat": weights["gat"],
    "trf": weights["transformer"],
}
headers = [name if w.shape[1] == 1 else f"{name} h{h}" for name, w in columns.items() for h in range(w.shape[1])]
table = torch.cat(list(columns.values()), dim=1)  # (neighbours, columns)
print(f"  {'from':8s} {'deg':>3s} " + " ".join(f"{h:>7s}" for h in headers))
for r, j in enumerate(senders.tolist()):
    sender = f"{j - offset}:{tokens[j - offset]}"
    print(f"  {sender:8s} {int(out_deg[j]):3d} " + " ".join(f"{w:7.3f}" for w in table[r].tolist()))
print(f"  {'total':8s} {'':3s} " + " ".join(f"{w:7.3f}" for w in table.sum(0).tolist()))
for name in ("gat", "transformer"):
    assert torch.allclose(weights[name].sum(0), torch.ones(4), atol=TOL), "a softmax over the neighbours"
print(
    "GCN's weights favour low-degree neighbours and need not sum to 1; attention weights sum to 1 per head."
    " max does not weigh at all: it keeps, per feature, the largest neighbour value."
)

# %% [markdown]
# The dense implementation (next section) records the same weights as an $n \times n$ matrix per
# head: `last_attention[b, h, i, j]`. Row $i$ of graph $b$ must hold exactly the edge weights above.

# %%
dense_trf = models["transformer"]
dense_trf.impl = "dense"
agg = dense_trf.blocks[0].aggregator
agg.record_attention = True
with torch.no_grad():
    dense_trf(batch)
agg.record_attention = False
dense_trf.impl = "sparse"
row = agg.last_attention[pick, :, node - offset, senders - offset].T  # (neighbours, heads)
assert torch.allclose(row, weights["transformer"], atol=TOL)
print(
    f"dense attention matrix: {tuple(agg.last_attention.shape)} (B, H, n, n); "
    f"row of {tokens[node - offset]!r} == sparse edge weights"
)

# %% [markdown]
# ## 4. Sparse and dense: one function, two implementations
#
# `impl="sparse"` runs DGL message passing on the batched graph; `impl="dense"` pads the batch to
# `(B, n, d)` and runs each aggregator's `forward_dense` with the adjacency as a mask (for the
# Transformer, one `scaled_dot_product_attention` call). Same parameters, same function: the outputs
# must agree, for every aggregator and on both the tree and the complete graph.

# %%
print(f"{'aggregator':12s} {'graph':9s} {'max |sparse - dense|':>22s}")
for graph_name, construction in (("tree", tree), ("complete", complete)):
    g = make_batch(construction)
    for name in AGGREGATORS:
        model = build(name, construction)
        with torch.no_grad():
            sparse = model(g)
            model.impl = "dense"
            dense = model(g)
        gap = (sparse - dense).abs().max().item()
        assert torch.allclose(sparse, dense, atol=TOL), (name, graph_name, gap)
        print(f"{name:12s} {graph_name:9s} {gap:22.1e}")
print("sparse == dense for every aggregator on both graphs")

# %% [markdown]
# ## What to take away
#
# * GCN, GAT and the Transformer are one encoder with one swapped module: how $i$ weighs $j$.
# * GCN's weights are a property of the graph; attention's are a function of the content, so the
#   same graph can be used differently by every head and every layer.
# * `model=gcn|gat|transformer|sum|mean|max` picks the aggregator in `train.py`; `model.impl` picks
#   the implementation without changing the function.
#
# Next: `03_graphs_for_sentences.py`, where the graph itself is the variable.

# %%
print("part 2 done: sparse and dense agree for every aggregator")
