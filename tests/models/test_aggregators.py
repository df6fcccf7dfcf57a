"""The three aggregators against dense, hand-written references (plain torch matrices).

Edges are directed ``j -> i`` ("i receives from j"); the dense adjacency used throughout is
``mask[i, j] = True`` iff that edge exists, so row i lists the nodes that node i attends to.
"""

from __future__ import annotations

import dgl
import pytest
import torch
import torch.nn.functional as F

from data.graphs import GraphConstruction, complete_edges, knn_edges, tree_edges, window_edges
from data.listops import make_example
from models.aggregators import AGGREGATORS, DotProductAttention, GATAttention, GCNAggregation
from models.dense import to_dense
from tests.helpers.encoders import graph_encoder

TOL = 1e-5

# [MAX 2 9 [MIN 4 7 ] 0 [SM 3 [MED 1 5 8 ] ] ]: a nested ListOps tree of 17 tokens.
LISTOPS_TOKENS = "[MAX 2 9 [MIN 4 7 ] 0 [SM 3 [MED 1 5 8 ] ] ]".split()
LISTOPS = make_example(LISTOPS_TOKENS)


# --------------------------------------------------------------------------------------------
# Helpers: graphs and dense references
# --------------------------------------------------------------------------------------------
def dense_mask(src: torch.Tensor, dst: torch.Tensor, n: int) -> torch.Tensor:
    """(n, n) bool with mask[i, j] True iff there is an edge j -> i."""
    mask = torch.zeros(n, n, dtype=torch.bool)
    mask[dst, src] = True
    return mask


def random_in_edges(n: int, gen: torch.Generator, p: float = 0.3) -> tuple[torch.Tensor, torch.Tensor]:
    """A random directed edge set, no duplicates, in which every node has at least one incoming edge
    (one forced random sender per node, the rest Bernoulli(p)); returned in a shuffled order."""
    adj = torch.rand(n, n, generator=gen) < p  # adj[i, j]: j -> i
    forced = torch.randint(0, n, (n,), generator=gen)
    adj[torch.arange(n), forced] = True
    dst, src = adj.nonzero(as_tuple=True)
    order = torch.randperm(src.numel(), generator=gen)
    return src[order], dst[order]


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(n, d) -> (1, H, n, d_h), the layout scaled_dot_product_attention expects."""
    n, d = x.shape
    return x.view(n, num_heads, d // num_heads).transpose(0, 1).unsqueeze(0)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(1, H, n, d_h) -> (n, H * d_h), heads concatenated per node."""
    _, heads, n, dh = x.shape
    return x.squeeze(0).transpose(0, 1).reshape(n, heads * dh)


def dense_transformer(
    agg: DotProductAttention, h: torch.Tensor, mask: torch.Tensor | None = None, scale: float | None = None
) -> torch.Tensor:
    """Multi-head attention of one sentence with torch's own kernel, reusing the aggregator's projections."""
    H = agg.num_heads
    q, k, v = split_heads(agg.query(h), H), split_heads(agg.key(h), H), split_heads(agg.value(h), H)
    attn_mask = None if mask is None else mask.view(1, 1, *mask.shape)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale)
    return agg.out(merge_heads(out))


def dense_transformer_weights(agg: DotProductAttention, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Attention weights (H, n, n) by a hand-written masked softmax: weights[h, i, j] = a_ij of head h."""
    H, dh = agg.num_heads, agg.head_dim
    q = agg.query(h).view(-1, H, dh).transpose(0, 1)  # (H, n, dh)
    k = agg.key(h).view(-1, H, dh).transpose(0, 1)
    scores = q @ k.transpose(1, 2) / dh**0.5  # (H, n, n)
    return scores.masked_fill(~mask, float("-inf")).softmax(-1)


def dense_gat(agg: GATAttention, h: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked additive attention written out densely; returns (output (n, d), weights (H, n, n))."""
    n, H, dh = h.shape[0], agg.num_heads, agg.head_dim
    wh = agg.proj(h).view(n, H, dh)
    score_dst = (wh * agg.attn_dst).sum(-1)  # (n, H): a_dst · W h_i
    score_src = (wh * agg.attn_src).sum(-1)  # (n, H): a_src · W h_j
    e = score_dst.t().unsqueeze(2) + score_src.t().unsqueeze(1)  # (H, n_i, n_j)
    e = F.leaky_relu(e, negative_slope=0.2)
    a = e.masked_fill(~mask, float("-inf")).softmax(-1)  # (H, n, n)
    per_head = a @ wh.transpose(0, 1)  # (H, n, dh)
    return agg.out(per_head.transpose(0, 1).reshape(n, H * dh)), a


def dense_gcn(agg: GCNAggregation, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """D_in^{-1/2} A D_out^{-1/2} (W h), degrees clamped at 1."""
    A = mask.float()
    deg_in = A.sum(1).clamp(min=1)  # row i: edges into i
    deg_out = A.sum(0).clamp(min=1)  # column j: edges out of j
    norm_adj = deg_in.rsqrt().unsqueeze(1) * A * deg_out.rsqrt().unsqueeze(0)
    return norm_adj @ agg.linear(h)


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def make_agg(name: str, dim: int, heads: int, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return AGGREGATORS[name](dim, num_heads=heads).eval()


def sparse_graphs() -> dict[str, tuple[torch.Tensor, torch.Tensor, int]]:
    """Named (src, dst, n) edge sets that are not complete; every node has an incoming edge."""
    gen = torch.Generator().manual_seed(7)
    n_tree = len(LISTOPS["heads"])
    knn_src, knn_dst = knn_edges(torch.randn(15, 4, generator=gen), [15], k=3, self_loops=True)
    rnd_src, rnd_dst = random_in_edges(11, gen)
    return {
        "tree": (*tree_edges(LISTOPS["heads"]), n_tree),
        "tree_no_loops": (*tree_edges(LISTOPS["heads"], self_loops=False), n_tree),
        "window1": (*window_edges(9, 1), 9),
        "window2_no_loops": (*window_edges(9, 2, self_loops=False), 9),
        "knn": (knn_src, knn_dst, 15),
        "random": (rnd_src, rnd_dst, 11),
    }


SPARSE = sparse_graphs()


# --------------------------------------------------------------------------------------------
# 1. Transformer on complete graphs == multi-head self-attention, per sentence of a batch
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dim,heads", [(16, 1), (32, 4), (64, 8)])
def test_transformer_on_complete_graphs_is_self_attention(dim, heads):
    lengths = [1, 3, 7, 12]
    agg = make_agg("transformer", dim, heads)
    g = dgl.batch([dgl.graph(complete_edges(n)) for n in lengths])
    torch.manual_seed(1)
    h = torch.randn(g.num_nodes(), dim)
    with torch.no_grad():
        out = agg(g, h)
        assert out.shape == (sum(lengths), dim)
        start = 0
        for n in lengths:
            ref = dense_transformer(agg, h[start : start + n])
            assert max_err(out[start : start + n], ref) < TOL, f"sentence of length {n}"
            start += n


def test_transformer_single_token_is_out_of_value():
    """A one-node graph attends only to itself (weight 1): the output is O(W_V h) exactly."""
    agg = make_agg("transformer", 8, 2)
    h = torch.randn(1, 8)
    with torch.no_grad():
        out = agg(dgl.graph(complete_edges(1)), h)
        assert max_err(out, agg.out(agg.value(h))) < TOL


def test_transformer_unscaled_uses_unit_scale():
    torch.manual_seed(0)
    agg = DotProductAttention(16, num_heads=4, scaled=False).eval()
    h = torch.randn(6, 16)
    with torch.no_grad():
        out = agg(dgl.graph(complete_edges(6)), h)
        assert max_err(out, dense_transformer(agg, h, scale=1.0)) < TOL
        # and it is genuinely different from the scaled version (the test can tell them apart)
        assert max_err(out, dense_transformer(agg, h)) > 1e-3


# --------------------------------------------------------------------------------------------
# 2. Transformer on sparse graphs == attention masked to the edges
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("graph", sorted(SPARSE))
@pytest.mark.parametrize("dim,heads", [(16, 1), (32, 4)])
def test_transformer_on_sparse_graph_is_masked_attention(graph, dim, heads):
    src, dst, n = SPARSE[graph]
    mask = dense_mask(src, dst, n)
    assert mask.any(1).all(), "every node needs an incoming edge for a finite softmax"
    assert not mask.all(), "the graph should really be sparse"
    agg = make_agg("transformer", dim, heads)
    torch.manual_seed(2)
    h = torch.randn(n, dim)
    with torch.no_grad():
        out = agg(dgl.graph((src, dst), num_nodes=n), h)
        ref = dense_transformer(agg, h, mask)
        assert max_err(out, ref) < TOL
        # the mask matters: unmasked attention gives something else
        assert max_err(out, dense_transformer(agg, h)) > 1e-4


def test_transformer_on_batched_sparse_graphs():
    """Batching different sparse graphs keeps each one's attention inside it."""
    agg = make_agg("transformer", 32, 4)
    names = ["tree", "window1", "random"]
    graphs = [dgl.graph((SPARSE[k][0], SPARSE[k][1]), num_nodes=SPARSE[k][2]) for k in names]
    g = dgl.batch(graphs)
    torch.manual_seed(3)
    h = torch.randn(g.num_nodes(), 32)
    with torch.no_grad():
        out = agg(g, h)
        start = 0
        for k in names:
            src, dst, n = SPARSE[k]
            ref = dense_transformer(agg, h[start : start + n], dense_mask(src, dst, n))
            assert max_err(out[start : start + n], ref) < TOL, k
            start += n


# --------------------------------------------------------------------------------------------
# 3. GAT == dense masked additive attention
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("graph", sorted(SPARSE) + ["complete"])
@pytest.mark.parametrize("dim,heads", [(16, 1), (32, 4), (64, 8)])
def test_gat_is_dense_additive_attention(graph, dim, heads):
    src, dst, n = SPARSE[graph] if graph != "complete" else (*complete_edges(10), 10)
    agg = make_agg("gat", dim, heads)
    torch.manual_seed(4)
    h = torch.randn(n, dim)
    with torch.no_grad():
        out = agg(dgl.graph((src, dst), num_nodes=n), h)
        ref, _ = dense_gat(agg, h, dense_mask(src, dst, n))
        assert max_err(out, ref) < TOL


def test_gat_scores_are_not_symmetric_in_src_dst():
    """Swapping a_src and a_dst changes the output: the reference tells the two roles apart."""
    src, dst, n = SPARSE["random"]
    agg = make_agg("gat", 16, 2)
    h = torch.randn(n, 16)
    mask = dense_mask(src, dst, n)
    with torch.no_grad():
        out = agg(dgl.graph((src, dst), num_nodes=n), h)
        agg.attn_src, agg.attn_dst = agg.attn_dst, agg.attn_src
        swapped, _ = dense_gat(agg, h, mask)
        assert max_err(out, swapped) > 1e-4


# --------------------------------------------------------------------------------------------
# 4. GCN == D_in^{-1/2} A D_out^{-1/2} W h
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("graph", sorted(SPARSE) + ["complete"])
def test_gcn_is_normalised_adjacency(graph):
    src, dst, n = SPARSE[graph] if graph != "complete" else (*complete_edges(10), 10)
    agg = make_agg("gcn", 24, 1)
    torch.manual_seed(5)
    h = torch.randn(n, 24)
    with torch.no_grad():
        out = agg(dgl.graph((src, dst), num_nodes=n), h)
        assert max_err(out, dense_gcn(agg, h, dense_mask(src, dst, n))) < TOL


def test_gcn_degrees_clamped_for_nodes_without_edges():
    """A directed chain 0 -> 1 -> 2 -> 3 plus an isolated node 4: node 0 receives nothing (zero
    output), node 3 sends nothing; the clamp keeps everything finite."""
    src, dst, n = torch.tensor([0, 1, 2]), torch.tensor([1, 2, 3]), 5
    agg = make_agg("gcn", 8, 1)
    h = torch.randn(n, 8)
    with torch.no_grad():
        out = agg(dgl.graph((src, dst), num_nodes=n), h)
        assert torch.isfinite(out).all()
        assert max_err(out, dense_gcn(agg, h, dense_mask(src, dst, n))) < TOL
        assert out[0].abs().max() == 0 and out[4].abs().max() == 0
        # every node here has in- and out-degree <= 1: node i+1 gets exactly W h_i
        assert max_err(out[1:4], agg.linear(h[0:3])) < TOL


def test_gcn_uses_in_degree_of_receiver_and_out_degree_of_sender():
    """A star: nodes 1..4 all send to node 0. deg_in(0) = 4, deg_out(j) = 1, so
    out_0 = Σ_j W h_j / sqrt(4 · 1) = Σ_j W h_j / 2."""
    src, dst = torch.tensor([1, 2, 3, 4]), torch.tensor([0, 0, 0, 0])
    agg = make_agg("gcn", 8, 1)
    h = torch.randn(5, 8)
    with torch.no_grad():
        out = agg(dgl.graph((src, dst), num_nodes=5), h)
        assert max_err(out[0], agg.linear(h[1:]).sum(0) / 2) < TOL


# --------------------------------------------------------------------------------------------
# 5. Permutation equivariance (aggregators) and invariance (encoder with a mean readout)
# --------------------------------------------------------------------------------------------
def relabel(src: torch.Tensor, dst: torch.Tensor, perm: torch.Tensor, gen: torch.Generator):
    """New node k is old node perm[k]: an old edge (s, d) becomes (inv[s], inv[d]), edges reshuffled."""
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel())
    order = torch.randperm(src.numel(), generator=gen)
    return inv[src][order], inv[dst][order]


@pytest.mark.parametrize("name", sorted(AGGREGATORS))
@pytest.mark.parametrize("graph", ["tree", "random", "knn", "complete"])
def test_aggregators_are_permutation_equivariant(name, graph):
    src, dst, n = SPARSE[graph] if graph != "complete" else (*complete_edges(9), 9)
    gen = torch.Generator().manual_seed(11)
    perm = torch.randperm(n, generator=gen)
    assert not torch.equal(perm, torch.arange(n))
    p_src, p_dst = relabel(src, dst, perm, gen)
    agg = make_agg(name, 32, 4)
    h = torch.randn(n, 32, generator=gen)
    with torch.no_grad():
        out = agg(dgl.graph((src, dst), num_nodes=n), h)
        out_perm = agg(dgl.graph((p_src, p_dst), num_nodes=n), h[perm])
    assert max_err(out_perm, out[perm]) < TOL
    if graph != "complete":  # on a sparse graph, permuting features alone must break it
        with torch.no_grad():
            wrong = agg(dgl.graph((src, dst), num_nodes=n), h[perm])
        assert max_err(wrong, out[perm]) > 1e-4


def token_graph(tok: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, root: int) -> dgl.DGLGraph:
    n = tok.numel()
    g = dgl.graph((src, dst), num_nodes=n)
    is_root = torch.zeros(n, dtype=torch.bool)
    is_root[root] = True
    g.ndata["tok"], g.ndata["pos"], g.ndata["root"] = tok, torch.arange(n), is_root
    return g


def permuted_token_graph(g: dgl.DGLGraph, perm: torch.Tensor, gen: torch.Generator) -> dgl.DGLGraph:
    src, dst = g.edges()
    p_src, p_dst = relabel(src, dst, perm, gen)
    pg = dgl.graph((p_src, p_dst), num_nodes=g.num_nodes())
    for key in ("tok", "pos", "root"):
        pg.ndata[key] = g.ndata[key][perm]
    return pg


@pytest.mark.parametrize("name", sorted(AGGREGATORS))
@pytest.mark.parametrize("readout", ["mean", "root"])
def test_encoder_without_positions_is_permutation_invariant(name, readout):
    gen = torch.Generator().manual_seed(13)
    vocab = 20
    tree_n = len(LISTOPS["heads"])
    rnd_src, rnd_dst, rnd_n = SPARSE["random"]
    graphs = [
        token_graph(
            torch.randint(3, vocab, (tree_n,), generator=gen),
            *tree_edges(LISTOPS["heads"]),
            root=LISTOPS["heads"].index(-1),
        ),
        token_graph(torch.randint(3, vocab, (rnd_n,), generator=gen), rnd_src, rnd_dst, root=0),
        token_graph(torch.randint(3, vocab, (6,), generator=gen), *complete_edges(6), root=0),
    ]
    permuted = [permuted_token_graph(g, torch.randperm(g.num_nodes(), generator=gen), gen) for g in graphs]
    torch.manual_seed(0)
    model = graph_encoder(
        vocab, 7, aggregator=name, hidden_dim=32, num_layers=3, num_heads=4, positional="none", readout=readout
    ).eval()
    with torch.no_grad():
        logits = model(dgl.batch(graphs))
        logits_perm = model(dgl.batch(permuted))
    assert logits.shape == (3, 7)
    assert max_err(logits, logits_perm) < TOL
    # the graphs give different logits, so equality above is not a constant output
    assert max_err(logits[0], logits[1]) > 1e-4


def test_encoder_with_sinusoidal_positions_is_not_permutation_invariant():
    """Control for the test above: with positions fed in, the same relabelling changes the logits."""
    gen = torch.Generator().manual_seed(17)
    g = token_graph(torch.randint(3, 20, (8,), generator=gen), *complete_edges(8), root=0)
    pg = permuted_token_graph(g, torch.randperm(8, generator=gen), gen)
    pg.ndata["pos"] = torch.arange(8)  # positions stay in place while the tokens move
    torch.manual_seed(0)
    model = graph_encoder(20, 5, hidden_dim=32, num_layers=2, positional="sinusoidal").eval()
    with torch.no_grad():
        assert max_err(model(g), model(pg)) > 1e-4


# --------------------------------------------------------------------------------------------
# 6. Gradients: DGL transformer and dense reference agree
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("graph", ["complete", "tree", "random"])
def test_transformer_gradients_match_dense_reference(graph):
    src, dst, n = SPARSE[graph] if graph != "complete" else (*complete_edges(10), 10)
    mask = dense_mask(src, dst, n)
    agg = make_agg("transformer", 32, 4)
    torch.manual_seed(6)
    h = torch.randn(n, 32)
    target, weight = torch.randn(n, 32), torch.randn(n, 32)

    def grads(forward):
        agg.zero_grad()
        x = h.clone().requires_grad_(True)
        out = forward(x)
        loss = ((out - target) ** 2).mean() + (out.tanh() * weight).sum() / n
        loss.backward()
        named = {k: p.grad.clone() for k, p in agg.named_parameters()}
        named["input"] = x.grad.clone()
        return named

    g = dgl.graph((src, dst), num_nodes=n)
    got = grads(lambda x: agg(g, x))
    want = grads(lambda x: dense_transformer(agg, x, mask))
    assert set(got) == {"input"} | {f"{m}.{p}" for m in ("query", "key", "value", "out") for p in ("weight", "bias")}
    for key in got:
        assert max_err(got[key], want[key]) < TOL, key
    # gradients reach the query and key projections (the attention scores) too
    assert got["query.weight"].abs().max() > 1e-3 and got["key.weight"].abs().max() > 1e-3
    # ...but not the key bias: q_i · b_K is the same for every j, and softmax ignores a shift
    assert got["key.bias"].abs().max() < TOL


# --------------------------------------------------------------------------------------------
# 7. record_attention
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["transformer", "gat"])
@pytest.mark.parametrize("graph", ["tree", "random"])
def test_record_attention_stores_normalised_edge_weights(name, graph):
    src, dst, n = SPARSE[graph]
    heads = 4
    agg = make_agg(name, 16, heads)
    g = dgl.graph((src, dst), num_nodes=n)
    h = torch.randn(n, 16)
    agg(g, h)
    assert agg.last_attention is None  # off by default
    agg.record_attention = True
    agg(g, h)  # with autograd on: the stored weights must still be detached
    att = agg.last_attention
    assert att.shape == (g.num_edges(), heads)
    assert not att.requires_grad
    assert (att > 0).all()
    per_node = torch.zeros(n, heads).index_add_(0, dst, att)
    assert max_err(per_node, torch.ones(n, heads)) < TOL
    # and the weights are the dense reference's a_ij on each edge j -> i
    mask = dense_mask(src, dst, n)
    with torch.no_grad():
        dense = dense_transformer_weights(agg, h, mask) if name == "transformer" else dense_gat(agg, h, mask)[1]
    assert max_err(att, dense[:, dst, src].t()) < TOL


def test_gcn_records_no_attention():
    agg = make_agg("gcn", 8, 1)
    agg(dgl.graph(complete_edges(3)), torch.randn(3, 8))
    assert agg.last_attention is None


@pytest.mark.parametrize("name", ["transformer", "gat"])
def test_hooks_that_are_off_hand_back_their_input_itself(name):
    """The equation calls every hook (models/aggregators/attention.py); switched off, each returns the very
    tensor it was given, so the plain path computes nothing more than its equation."""
    from models.aggregators.attention import add_bias

    agg = make_agg(name, 8, 2)
    g = dgl.graph(complete_edges(3))
    g.edata["etype"] = torch.zeros(g.num_edges(), dtype=torch.long)
    s, h = torch.randn(g.num_edges(), 2, 1), torch.randn(3, 2, 4)
    scores, scores_dense = torch.randn(1, 2, 3, 3), torch.randn(1, 2, 3, 3)
    dg = to_dense(g, "cpu", edge_types=True)
    assert add_bias(s, None) is s and agg.masked_heads(h) is h
    assert agg.typed_values(g, h) is h and agg.typed_values_dense(scores, scores_dense, dg) is scores
    typed = (agg.typed_keys(g, s), agg.typed_keys_dense(scores, scores, dg)) if name == "transformer" else ()
    typed += (agg.typed_scores(g, s), agg.typed_scores_dense(scores, dg)) if name == "gat" else ()
    assert typed[0] is s and typed[1] is scores
    agg.record(scores)
    assert agg.last_attention is None and not agg.needs_weights


# --------------------------------------------------------------------------------------------
# 8. GraphEncoder: readouts, weight sharing, post-norm, argument checks
# --------------------------------------------------------------------------------------------
def listops_batch(readout: str) -> dgl.DGLGraph:
    """Three ListOps expressions as complete graphs; a <cls> node (id 2) when the readout needs one."""
    expressions = ["[MAX 2 9 [MIN 4 7 ] 0 ]", "[SM 1 2 ]", LISTOPS_TOKENS]
    construction = GraphConstruction(name="complete", cls_id=2 if readout == "cls" else None)
    graphs = []
    for expr in expressions:
        ex = make_example(expr.split() if isinstance(expr, str) else expr)
        ids = [3 + sum(map(ord, t)) % 15 for t in ex["tokens"]]  # any ids in 3..17
        graphs.append(construction(ids, ex["heads"]))
    return dgl.batch(graphs)


@pytest.mark.parametrize("name", sorted(AGGREGATORS))
@pytest.mark.parametrize("readout", ["mean", "root", "cls"])
def test_encoder_output_shape_per_readout(name, readout):
    g = listops_batch(readout)
    if readout == "cls":
        assert int((g.ndata["pos"] < 0).sum()) == 3
    torch.manual_seed(0)
    model = graph_encoder(20, 10, aggregator=name, hidden_dim=32, num_layers=2, readout=readout).eval()
    with torch.no_grad():
        logits = model(g)
    assert logits.shape == (3, 10)
    assert torch.isfinite(logits).all()


def test_encoder_mean_readout_by_hand():
    """Mean readout = classifier(mean of the final token states), computed per graph; <cls> left out."""
    g = listops_batch("cls")
    torch.manual_seed(0)
    model = graph_encoder(20, 10, hidden_dim=32, num_layers=2, readout="mean").eval()
    with torch.no_grad():
        h = model.node_states(g)
        logits = model(g)
    start, rows = 0, []
    for n in g.batch_num_nodes().tolist():
        rows.append(h[start : start + n - 1].mean(0))  # the last node of each graph is <cls>
        start += n
    assert max_err(logits, model.classifier(torch.stack(rows))) < TOL


def test_encoder_root_and_cls_readouts_pick_their_node():
    torch.manual_seed(0)
    for readout, pick in (("root", lambda g: g.ndata["root"]), ("cls", lambda g: g.ndata["pos"] < 0)):
        g = listops_batch(readout)
        model = graph_encoder(20, 10, hidden_dim=32, num_layers=2, readout=readout).eval()
        with torch.no_grad():
            expected = model.classifier(model.node_states(g)[pick(g)])
            assert max_err(model(g), expected) < TOL, readout


def count_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("name", sorted(AGGREGATORS))
def test_share_weights(name):
    kwargs = dict(aggregator=name, hidden_dim=32, num_layers=3, num_heads=4)
    shared = graph_encoder(20, 10, share_weights=True, **kwargs)
    separate = graph_encoder(20, 10, share_weights=False, **kwargs)
    block_params = count_params(separate.blocks[0])
    assert count_params(shared) < count_params(separate)
    assert count_params(separate) - count_params(shared) == 2 * block_params
    layers = shared.layers()
    assert len(layers) == 3 and all(b is layers[0] for b in layers)
    distinct = separate.layers()
    assert len(distinct) == 3 and len({id(b) for b in distinct}) == 3


def test_shared_weights_apply_one_block_three_times():
    torch.manual_seed(0)
    model = graph_encoder(20, 10, hidden_dim=32, num_layers=3, share_weights=True, positional="none").eval()
    g = listops_batch("mean")
    with torch.no_grad():
        h = model.embed(g.ndata["tok"])
        for _ in range(3):
            h = model.blocks[0](g, h)
        assert max_err(model.node_states(g), model.final_norm(h)) < TOL


@pytest.mark.parametrize("name", sorted(AGGREGATORS))
def test_post_norm_runs_and_ends_normalised(name):
    torch.manual_seed(0)
    model = graph_encoder(20, 10, aggregator=name, hidden_dim=32, num_layers=2, norm="post").eval()
    g = listops_batch("mean")
    with torch.no_grad():
        h = model.node_states(g)
        logits = model(g)
    assert logits.shape == (3, 10) and torch.isfinite(logits).all()
    assert isinstance(model.final_norm, torch.nn.Identity)
    # post-LN: the last op is LayerNorm with its initial affine (1, 0), so each node has mean 0, var 1
    assert h.mean(-1).abs().max() < 1e-5
    assert (h.var(-1, unbiased=False) - 1).abs().max() < 1e-3


@pytest.mark.parametrize(
    "argument,value,valid",
    [
        ("aggregator", "lstm", ["gcn", "gat", "transformer"]),
        ("readout", "max", ["mean", "root", "cls"]),
        ("positional", "learned", ["sinusoidal", "none"]),
        ("norm", "sandwich", ["pre", "post"]),
    ],
)
def test_encoder_rejects_unknown_options(argument, value, valid):
    with pytest.raises(ValueError) as info:
        graph_encoder(20, 10, **{argument: value})
    message = str(info.value)
    assert repr(value) in message
    for option in valid:
        assert option in message


@pytest.mark.parametrize("name", ["gat", "transformer"])
def test_hidden_dim_must_divide_into_heads(name):
    with pytest.raises(ValueError, match="divisible"):
        graph_encoder(20, 10, aggregator=name, hidden_dim=30, num_heads=4)
    with pytest.raises(ValueError, match="divisible"):
        AGGREGATORS[name](30, num_heads=4)


def test_post_norm_block_by_hand():
    """Post-LN block: h' = LN1(h + Agg(h)), then LN2(h' + FFN(h')); the aggregator sees un-normalised h."""
    torch.manual_seed(0)
    model = graph_encoder(20, 10, hidden_dim=32, num_layers=1, norm="post").eval()
    block = model.blocks[0]
    with torch.no_grad():  # move the LayerNorms off their identity-like initial affine
        for ln in (block.norm1, block.norm2):
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.normal_()
    g = dgl.graph(complete_edges(7))
    h = torch.randn(7, 32)
    with torch.no_grad():
        mid = block.norm1(h + block.aggregator(g, h))
        expected = block.norm2(mid + block.ffn(mid))
        assert max_err(block(g, h), expected) < TOL
