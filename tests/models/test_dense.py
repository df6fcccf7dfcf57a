"""The dense twin computes the same function as message passing, with the same parameters.

For every model x graph, on batches of mixed lengths: outputs and parameter gradients of
``impl=sparse`` (DGL) and ``impl=dense`` (padded batch + adjacency mask) agree within 1e-5.
"""

import itertools
import types

import dgl
import pytest
import torch

from data import listops
from data.graphs import GRAPH_KINDS, GraphConstruction, knn_edges
from engine.placement import Placement
from evaluate import evaluate
from models.aggregators import AGGREGATORS
from models.dense import to_dense
from models.knn import knn_adjacency
from tests.conftest import compose_config
from tests.helpers.encoders import graph_encoder
from train import run

MODELS = tuple(AGGREGATORS)  # gcn, gat, transformer and the attention-free sum, mean, max
# every registered construction that ListOps can build (dep needs text) and that needs no binary tree
GRAPHS = tuple(name for name, kind in GRAPH_KINDS.items() if not kind.text_only and not kind.binary)


def batch(construction, num=7, seed=3, max_length=40):
    """A batch of ListOps graphs of mixed lengths (4 to ~40 tokens), and a bare digit (one node)."""
    examples = list(listops.generate(num, seed=seed, max_length=max_length, root_operator=True))
    examples.append(listops.make_example(["7"]))
    ids = {t: i + 3 for i, t in enumerate(listops.TOKENS)}
    graphs = [construction([ids[t] for t in ex["tokens"]], ex["heads"]) for ex in examples]
    assert len({g.num_nodes() for g in graphs}) > 2, "want mixed lengths"
    return dgl.batch(graphs)


def encoder(model, construction, readout="mean", **kw):
    torch.manual_seed(0)
    return graph_encoder(
        20,
        10,
        aggregator=model,
        hidden_dim=32,
        num_layers=2,
        num_heads=4,
        construction=construction,
        readout=readout,
        **kw,
    ).eval()


def outputs_and_grads(m, g, impl):
    m.impl = impl
    m.zero_grad()
    logits = m(g)
    (logits * torch.linspace(-1, 1, logits.numel()).view_as(logits)).sum().backward()  # a non-trivial loss
    return logits.detach(), {n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("model,graph", list(itertools.product(MODELS, GRAPHS)))
@pytest.mark.parametrize("self_loops", [True, False])
def test_sparse_and_dense_agree(model, graph, self_loops):
    construction = GraphConstruction(name=graph, self_loops=self_loops, k=3)
    g = batch(construction)
    m = encoder(model, construction)
    sparse_out, sparse_grads = outputs_and_grads(m, g, "sparse")
    dense_out, dense_grads = outputs_and_grads(m, g, "dense")
    torch.testing.assert_close(dense_out, sparse_out, atol=1e-5, rtol=0)
    assert sparse_grads.keys() == dense_grads.keys() and len(sparse_grads) > 5
    for name in sparse_grads:
        torch.testing.assert_close(dense_grads[name], sparse_grads[name], atol=1e-5, rtol=0, msg=name)


@pytest.mark.parametrize("model,readout", list(itertools.product(MODELS, ["root", "cls"])))
@pytest.mark.parametrize("graph", ["complete", "knn", "tree", "bpt"])
def test_readouts_agree(model, readout, graph):
    construction = GraphConstruction(name=graph, k=3, cls_id=2 if readout == "cls" else None)
    g = batch(construction, seed=5)
    m = encoder(model, construction, readout=readout, share_weights=True, norm="post")
    m.impl = "sparse"
    sparse = m(g)
    m.impl = "dense"
    torch.testing.assert_close(m(g), sparse, atol=1e-5, rtol=0)


def test_dense_graph_layout_round_trips():
    g = batch(GraphConstruction(name="tree"))
    dg = to_dense(g, "cpu")
    sizes = g.batch_num_nodes()
    assert dg.shape == (len(sizes), int(sizes.max()))
    assert dg.valid.sum() == g.num_nodes()
    x = torch.randn(g.num_nodes(), 5)
    padded = dg.pad(x)
    assert padded[~dg.valid].abs().sum() == 0
    torch.testing.assert_close(dg.unpad(padded), x)
    assert dg.adjacency().sum() == g.num_edges()
    src, dst = g.edges()
    b = torch.repeat_interleave(torch.arange(len(sizes)), sizes)
    local = torch.arange(g.num_nodes()) - (torch.cumsum(sizes, 0) - sizes)[b]
    assert dg.adjacency()[b[dst], local[dst], local[src]].all()
    complete = to_dense(batch(GraphConstruction(name="complete")), "cpu", complete=True)
    assert complete.adj is None and not complete.unmasked()  # mixed lengths: padding needs a mask


def test_knn_adjacency_matches_knn_edges():
    torch.manual_seed(1)
    sizes = [2, 5, 9, 4, 12]
    x = torch.randn(sum(sizes), 6)
    src, dst = knn_edges(x, sizes, k=3, self_loops=False)
    g = dgl.graph((src, dst), num_nodes=sum(sizes))
    g.set_batch_num_nodes(torch.tensor(sizes))
    dg = to_dense(g, "cpu")
    adj = knn_adjacency(dg.pad(x), dg.valid, k=3)
    assert torch.equal(adj, dg.adjacency())


def test_auto_picks_by_edge_density():
    construction = GraphConstruction(name="tree")
    g = batch(construction)
    sizes = g.batch_num_nodes()
    density = g.num_edges() / (len(sizes) * sizes.max().item() ** 2)
    m = encoder("transformer", construction, impl="auto", dense_min_density=float(density) + 1e-3)
    assert m.choose_impl(g) == "sparse"
    m.dense_min_density = float(density) - 1e-3
    assert m.choose_impl(g) == "dense"


def test_graphs_that_cannot_follow_the_model_force_dense():
    """With a CPU-only DGL and a GPU, graphs stay on the CPU: auto/dense run dense, sparse runs message passing
    in stock torch (tests/models/test_torch_message_passing.py)."""
    m = encoder("transformer", GraphConstruction(name="complete"), impl="auto")
    elsewhere = types.SimpleNamespace(device=torch.device("meta"))
    assert m.choose_impl(elsewhere) == "dense"
    m.impl = "sparse"
    assert m.choose_impl(elsewhere) == "torch_sparse"
    assert Placement.decide(torch.device("cpu"), "sparse").graphs.type == "cpu"


def test_checkpoint_scores_the_same_under_both_impls(tmp_path):
    cfg = compose_config(
        [
            "debug=tiny",
            "trainer.progress=false",
            "logger=none",
            "model=gat",
            "graph=window",
            "model.impl=dense",
            "trainer.max_epochs=2",
        ]
    )
    results = run(cfg, tmp_path / "run")
    ckpt = tmp_path / "run" / "checkpoints" / "best.pt"
    for impl in ("sparse", "dense", "auto"):
        ev = evaluate(compose_config([f"checkpoint={ckpt}", f"impl={impl}"], config_name="evaluate"), tmp_path / impl)
        assert ev["accuracy"] == results["test_acc"] and ev["impl"] == impl


@pytest.mark.parametrize("model", MODELS)
def test_nodes_with_no_incoming_edge_agree(model):
    """A one-token tree without self loops has no edge at all: sparse sums nothing, dense must match."""
    construction = GraphConstruction(name="tree", self_loops=False)
    g = dgl.batch([construction([5], [-1]), construction([3, 7, 4], [-1, 0, 0]), construction([6, 6], [-1, 0])])
    assert g.in_degrees()[0] == 0
    m = encoder(model, construction)
    sparse_out, sparse_grads = outputs_and_grads(m, g, "sparse")
    dense_out, dense_grads = outputs_and_grads(m, g, "dense")
    assert torch.isfinite(dense_out).all()
    torch.testing.assert_close(dense_out, sparse_out, atol=1e-5, rtol=0)
    for name in sparse_grads:
        torch.testing.assert_close(dense_grads[name], sparse_grads[name], atol=1e-5, rtol=0, msg=name)


# --------------------------------------------------------------------------------------------
# Direction-aware messages (edge types) and the gated update: the twins stay equal
# --------------------------------------------------------------------------------------------
TYPED_GRAPHS = ("complete", "tree", "binary_tree", "window", "bpt", "knn")


@pytest.mark.parametrize("model,graph", list(itertools.product(MODELS, TYPED_GRAPHS)))
def test_sparse_and_dense_agree_with_edge_types(model, graph):
    construction = GraphConstruction(name=graph, k=3, phrase_id=2)
    g = batch(construction, seed=4)
    m = encoder(model, construction, edge_types=True, update="gru", readout="root")
    with torch.no_grad():  # the type parameters start at zero: give them values so they matter
        for name, p in m.named_parameters():
            if "rel_" in name:
                p.normal_()
    sparse_out, sparse_grads = outputs_and_grads(m, g, "sparse")
    dense_out, dense_grads = outputs_and_grads(m, g, "dense")
    torch.testing.assert_close(dense_out, sparse_out, atol=1e-5, rtol=0)
    assert any("rel_" in n or "gru" in n for n in sparse_grads)
    for name in sparse_grads:
        torch.testing.assert_close(dense_grads[name], sparse_grads[name], atol=1e-5, rtol=0, msg=name)


@pytest.mark.parametrize("model", MODELS)
def test_sparse_and_dense_agree_with_edge_types_and_cls(model):
    construction = GraphConstruction(name="complete", cls_id=2)
    g = batch(construction, seed=6)
    m = encoder(model, construction, edge_types=True, readout="cls")
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "rel_" in name:
                p.normal_()
    m.impl = "sparse"
    sparse = m(g)
    m.impl = "dense"
    torch.testing.assert_close(m(g), sparse, atol=1e-5, rtol=0)
