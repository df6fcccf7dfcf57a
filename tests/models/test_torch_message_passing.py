"""Every aggregator's message passing in stock torch (``forward_edges``, ``models/torch_mp.py``) is its DGL path.

``model.impl=torch_sparse`` runs it anywhere; ``impl=sparse`` runs it where DGL cannot put its graphs on the
model's device (PyPI's DGL on a GPU, ``engine/placement.py``). Checked here, within 1e-5:

* each aggregator of the encoder family, with and without edge types, on batches of mixed lengths of the
  graphs the repo builds (complete, tree with and without self loops, binary tree, window, bpt) and on a
  batch with nodes that receive nothing, a lone node and a repeated edge: outputs, gradients of the input and
  of every parameter, and the recorded attention (DGL gives 0 to a node with no incoming edge for the sum,
  the mean and the max, and its softmax has no edge to weigh there: so does stock torch);
* the whole encoder, every model x graph (kNN's per-layer rebuild included) and every readout;
* a tiny ``train.py`` run trains with ``impl=torch_sparse``, writes results.json, and its losses are the
  DGL run's;
* the placement rule, on a faked GPU: ``impl=sparse`` resolves to ``torch_sparse`` and says so in one line.
"""

from __future__ import annotations

import itertools
import json
import logging

import dgl
import pytest
import torch

from data.graphs import GraphConstruction
from engine import placement
from engine.placement import Placement
from models.aggregators import AGGREGATORS, MultiHeadAttention
from models.impl import choose_impl, sparse_error
from models.torch_mp import EdgeGraph, segment_max
from tests.conftest import compose_config
from tests.models.test_dense import batch, encoder, outputs_and_grads
from train import run

TOL = 1e-5
MODELS = tuple(AGGREGATORS)  # gcn, gin, gat, transformer, sum, mean, max
NUM_TYPES = 6  # len(data.graphs.EDGE_TYPES)
CPU, GPU = torch.device("cpu"), torch.device("cuda")


def receives_nothing() -> dgl.DGLGraph:
    """A chain 0 -> 1 -> 2 -> 3 with no self loops (node 0 receives nothing), node 3 with a self loop and the
    edge 2 -> 3 twice; a lone node; a pair 0 <-> 1. Random edge types."""
    graphs = [
        dgl.graph(([0, 1, 2, 2, 3], [1, 2, 3, 3, 3]), num_nodes=4),
        dgl.graph(([], []), num_nodes=1),
        dgl.graph(([0, 1], [1, 0]), num_nodes=2),
    ]
    g = dgl.batch(graphs)
    g.edata["etype"] = torch.randint(0, NUM_TYPES, (g.num_edges(),), generator=torch.Generator().manual_seed(0))
    return g


GRAPHS = {
    "complete": GraphConstruction(name="complete"),
    "tree": GraphConstruction(name="tree"),
    "tree_no_self_loops": GraphConstruction(name="tree", self_loops=False),
    "binary_tree": GraphConstruction(name="binary_tree"),
    "window": GraphConstruction(name="window", window=2),
    "bpt": GraphConstruction(name="bpt"),
    "no_incoming": None,
}


def graph_of(name: str) -> dgl.DGLGraph:
    return receives_nothing() if GRAPHS[name] is None else batch(GRAPHS[name], seed=2)


def aggregator(model: str, typed: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    agg = AGGREGATORS[model](32, num_heads=4, edge_types=NUM_TYPES if typed else 0).eval()
    with torch.no_grad():  # the type parameters start at zero: give them values so they matter
        for name, p in agg.named_parameters():
            if "rel_" in name:
                p.normal_()
    if isinstance(agg, MultiHeadAttention):
        agg.record_attention = True
    return agg


def run_aggregator(agg, forward, h0: torch.Tensor):
    """Output, gradient of the input, of every parameter, and the recorded attention (None without one).
    The loss is a mean over the nodes, so that gradients are O(1) and 1e-5 is a tolerance of float32's rounding."""
    agg.zero_grad()
    h = h0.clone().requires_grad_()
    out = forward(h)
    ((out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum() / len(out)).backward()
    grads = {n: p.grad.clone() for n, p in agg.named_parameters() if p.grad is not None}
    return out.detach(), h.grad, grads, agg.last_attention


def max_difference(a, b) -> float:
    return float((a - b).abs().max()) if a.numel() else 0.0


@pytest.mark.parametrize("model,graph", list(itertools.product(MODELS, GRAPHS)))
@pytest.mark.parametrize("typed", [False, True])
def test_each_aggregator_equals_its_dgl_path(model, graph, typed):
    g = graph_of(graph)
    agg = aggregator(model, typed)
    h = torch.randn(g.num_nodes(), 32, generator=torch.Generator().manual_seed(1))
    eg = EdgeGraph.of(g, CPU)
    out, dh, grads, attention = run_aggregator(agg, lambda x: agg.forward_edges(x, eg), h)
    ref_out, ref_dh, ref_grads, ref_attention = run_aggregator(agg, lambda x: agg(g, x), h)
    torch.testing.assert_close(out, ref_out, atol=TOL, rtol=0)
    torch.testing.assert_close(dh, ref_dh, atol=TOL, rtol=0)
    assert grads.keys() == ref_grads.keys() and len(grads) >= 1
    for name in grads:
        torch.testing.assert_close(grads[name], ref_grads[name], atol=TOL, rtol=0, msg=name)
    if ref_attention is not None:  # (E, H) per edge, in DGL's edge order
        torch.testing.assert_close(attention, ref_attention, atol=TOL, rtol=0)
    if graph == "no_incoming":  # nodes 0 and 4 receive nothing: 0 before the output projection
        assert (g.in_degrees()[[0, 4]] == 0).all()
        if not isinstance(agg, MultiHeadAttention) and not typed and model != "gcn":
            torch.testing.assert_close(out[[0, 4]], agg.linear.bias.detach().expand(2, -1), atol=0, rtol=0)


@pytest.mark.parametrize("model", ["gat", "transformer"])
def test_attention_is_stable_where_scores_are_large(model):
    """Scores in the hundreds: exp overflows unless each receiver's maximum is subtracted first, as DGL does."""
    g = graph_of("bpt")
    agg = aggregator(model, typed=False)
    h = 30 * torch.randn(g.num_nodes(), 32, generator=torch.Generator().manual_seed(1))
    eg = EdgeGraph.of(g, CPU)
    out, dh, grads, attention = run_aggregator(agg, lambda x: agg.forward_edges(x, eg), h)
    ref_out, ref_dh, ref_grads, ref_attention = run_aggregator(agg, lambda x: agg(g, x), h)
    assert float(attention.max()) > 0.99  # a softmax this sharp needs the shift
    torch.testing.assert_close(attention, ref_attention, atol=TOL, rtol=0)
    torch.testing.assert_close(out, ref_out, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(dh, ref_dh, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("model,graph", list(itertools.product(MODELS, ["complete", "tree", "window", "bpt", "knn"])))
def test_the_encoder_equals_its_dgl_path(model, graph):
    construction = GraphConstruction(name=graph, k=3)
    g = batch(construction)
    m = encoder(model, construction)
    out, grads = outputs_and_grads(m, g, "torch_sparse")
    ref_out, ref_grads = outputs_and_grads(m, g, "sparse")
    torch.testing.assert_close(out, ref_out, atol=TOL, rtol=0)
    assert grads.keys() == ref_grads.keys() and len(grads) > 5
    for name in grads:
        torch.testing.assert_close(grads[name], ref_grads[name], atol=TOL, rtol=0, msg=name)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("graph,readout", [("tree", "root"), ("knn", "cls"), ("bpt", "cls"), ("complete", "root")])
def test_the_encoder_with_edge_types_and_readouts_equals_its_dgl_path(model, graph, readout):
    construction = GraphConstruction(name=graph, k=3, phrase_id=2, cls_id=2 if readout == "cls" else None)
    g = batch(construction, seed=4)
    m = encoder(model, construction, edge_types=True, update="gru", readout=readout)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "rel_" in name:
                p.normal_()
    out, grads = outputs_and_grads(m, g, "torch_sparse")
    ref_out, ref_grads = outputs_and_grads(m, g, "sparse")
    torch.testing.assert_close(out, ref_out, atol=TOL, rtol=0)
    for name in ref_grads:
        torch.testing.assert_close(grads[name], ref_grads[name], atol=TOL, rtol=0, msg=name)


def test_segment_max_gives_zero_where_nothing_arrives_and_the_gradient_to_the_maximum():
    messages = torch.tensor([[1.0, -5.0], [3.0, -7.0], [-2.0, -1.0]], requires_grad=True)
    dst = torch.tensor([0, 0, 2])
    out = segment_max(messages, dst, 4)
    torch.testing.assert_close(out, torch.tensor([[3.0, -5.0], [0.0, 0.0], [-2.0, -1.0], [0.0, 0.0]]))
    out.sum().backward()
    torch.testing.assert_close(messages.grad, torch.tensor([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]]))


def test_a_tiny_run_trains_with_torch_sparse_as_with_dgl(tmp_path):
    losses = {}
    for impl in ("torch_sparse", "sparse"):
        overrides = ["debug=tiny", "trainer.progress=false", "logger=none", "model=gat", "graph=tree"]
        cfg = compose_config(overrides + [f"model.impl={impl}", "trainer.max_epochs=2"])
        results = run(cfg, tmp_path / impl)
        on_disk = json.loads((tmp_path / impl / "results.json").read_text())
        assert on_disk["epochs"] == 2 and on_disk["test_acc"] == results["test_acc"]
        rows = (tmp_path / impl / "metrics.csv").read_text().splitlines()
        header = rows[0].split(",")
        losses[impl] = [float(r.split(",")[header.index("train_loss")]) for r in rows[1:]]
    assert len(losses["torch_sparse"]) == 2
    torch.testing.assert_close(torch.tensor(losses["torch_sparse"]), torch.tensor(losses["sparse"]), atol=0, rtol=1e-5)


@pytest.fixture
def gpu_without_dgl_cuda(monkeypatch):
    """Pretend torch sees a GPU and PyPI's CPU-only DGL is installed."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(placement, "_dgl_reaches", lambda device: False)


def test_sparse_on_a_gpu_runs_stock_torch_and_says_so(gpu_without_dgl_cuda, caplog):
    for impl in ("sparse", "torch_sparse"):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="train"):
            p = Placement.decide("cuda", impl)
        assert (p.device, p.graphs) == (GPU, CPU)
        lines = [r.getMessage() for r in caplog.records]
        assert lines == [
            f"this DGL build is CPU-only: graphs stay on the CPU, model.impl={impl} runs message passing in "
            "stock torch (models/torch_mp.py) on cuda"
        ]
        assert choose_impl(impl, *p.devices, 64, lambda: 0.01, 0.07, stock_torch=True) == "torch_sparse"
    # a model with no stock-torch path (MiniLM) is still refused in one line
    with pytest.raises(ValueError) as e:
        choose_impl("sparse", GPU, CPU, 64, lambda: 0.01, 0.07)
    assert str(e.value) == sparse_error(GPU)
    # auto and dense there are unchanged: dense
    assert choose_impl("auto", GPU, CPU, 10_000, lambda: 0.001, 0.07, stock_torch=True) == "dense"


def test_on_the_cpu_nothing_changes_unless_asked():
    for impl, expected in (("sparse", "sparse"), ("dense", "dense"), ("torch_sparse", "torch_sparse")):
        assert choose_impl(impl, CPU, CPU, 64, lambda: 0.01, 0.07, stock_torch=True) == expected
    assert choose_impl("auto", CPU, CPU, 64, lambda: 0.01, 0.07, stock_torch=True) == "sparse"  # DGL's, by density
    with pytest.raises(ValueError, match="^model.impl=torch_sparse: this model has no message passing in stock torch"):
        choose_impl("torch_sparse", CPU, CPU, 64, lambda: 0.01, 0.07)


def test_the_encoder_with_graphs_that_cannot_follow_runs_stock_torch(monkeypatch):
    """Graphs on another device than the model (a GPU with PyPI's DGL): impl=sparse runs ``forward_edges``,
    the same function as DGL's path on graphs that can follow."""
    construction = GraphConstruction(name="window", window=2)
    g = batch(construction)
    m = encoder("transformer", construction, impl="sparse")
    expected = m(g)
    monkeypatch.setattr(dgl.DGLGraph, "device", property(lambda self: torch.device("meta")))
    assert m.choose_impl(g) == "torch_sparse"
    torch.testing.assert_close(m(g), expected, atol=TOL, rtol=0)
