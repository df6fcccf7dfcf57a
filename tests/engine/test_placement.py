"""engine/placement.py: the one decision of where a run computes (device, graphs), and models/impl.py: the impl
of each batch on that placement, tested on the CPU with CUDA and DGL's CUDA build mocked (the decision is a
table; nothing here needs a GPU)."""

from __future__ import annotations

import itertools
import logging

import dgl
import pytest
import torch

from data.graphs import GraphConstruction
from engine import placement
from engine.memory import runs_dense
from engine.placement import Placement, sparse_available
from models import model_config
from models.encoder import EncoderConfig, GraphEncoder
from models.impl import GPU_DENSE_MAX_NODES, check_impl, choose_impl, sparse_error
from tests.conftest import compose_config
from tests.helpers.encoders import graph_encoder

CPU, GPU = torch.device("cpu"), torch.device("cuda")
SPARSE_CUDA_ERROR = (
    "model.impl=sparse needs DGL's graphs on cuda, and this DGL build cannot put them there "
    "(PyPI's DGL wheel is CPU-only): install DGL's CUDA wheel (docs/troubleshooting.md) "
    "or use model.impl=dense or model.impl=auto"
)


@pytest.fixture
def machine(monkeypatch):
    """Pretend torch sees a GPU, and say whether DGL's CUDA build is installed."""

    def make(gpu: bool, dgl_cuda: bool):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
        monkeypatch.setattr(placement, "_dgl_reaches", lambda device: dgl_cuda)

    return make


@pytest.mark.parametrize(
    "device, impl, dgl_cuda",
    list(itertools.product(("cpu", "cuda", "auto"), ("sparse", "dense", "auto", "torch_sparse"), (True, False))),
)
def test_the_decision_table(machine, caplog, device, impl, dgl_cuda):
    machine(gpu=True, dgl_cuda=dgl_cuda)
    on_gpu = device in ("cuda", "auto")  # auto takes the GPU torch sees
    with caplog.at_level(logging.WARNING, logger="train"):
        p = Placement.decide(device, impl)
    assert p.device == (GPU if on_gpu else CPU)
    graphs_follow = not on_gpu or dgl_cuda
    assert p.graphs == (p.device if graphs_follow else CPU)
    assert p.devices == (p.device, p.graphs)
    assert sparse_available(p.device) == graphs_follow
    # where DGL cannot follow, message passing runs in stock torch (tests/models/test_torch_message_passing.py)
    runs = (
        "the model runs dense on cuda"
        if impl in ("dense", "auto")
        else f"model.impl={impl} runs message passing in stock torch"
    )
    warned = f"this DGL build is CPU-only: graphs stay on the CPU, {runs}" in caplog.text
    assert warned == (not graphs_follow)


def test_no_gpu_means_the_cpu(machine):
    machine(gpu=False, dgl_cuda=False)
    assert Placement.decide("auto", "sparse") == Placement(CPU, CPU)
    with pytest.raises(ValueError, match=r"^device=cuda but torch sees no GPU; use device=auto or device=cpu$"):
        Placement.decide("cuda", "auto")
    with pytest.raises(ValueError, match=r"^unknown device 'tpu'; valid: auto, cpu, cuda$"):
        Placement.decide("tpu", "auto")


def test_an_unknown_impl_is_refused_in_one_line_by_its_owner():
    """models/impl.py holds the values and the one line; the config, evaluate.py's impl= and each batch use it."""
    valid = r"valid: sparse, dense, auto, torch_sparse$"
    with pytest.raises(ValueError, match=rf"^unknown model.impl 'fast'; {valid}"):
        check_impl("fast")
    with pytest.raises(ValueError, match=rf"^unknown impl 'fast'; {valid}"):
        check_impl("fast", "impl")
    with pytest.raises(ValueError, match=rf"^unknown model.impl 'fast'; {valid}"):
        choose_impl("fast", CPU, CPU, 64, lambda: 1.0, 0.07)
    fields = {**compose_config(["model=transformer"]).model, "impl": "fast"}
    with pytest.raises(ValueError, match=rf"^unknown model.impl 'fast'; {valid}"):
        EncoderConfig.from_mapping(fields)


def test_sparse_error_names_the_device_and_the_fix():
    assert sparse_error("cuda") == SPARSE_CUDA_ERROR
    assert sparse_available("cpu") and sparse_available(CPU)


# a batch: (largest graph's nodes, density); the CPU threshold 0.07 (conf/encoder/default.yaml)
SMALL_SPARSE, SMALL_DENSE, HUGE_SPARSE, HUGE_DENSE = (64, 0.02), (64, 1.0), (5000, 0.001), (5000, 1.0)


@pytest.mark.parametrize(
    "impl, model, graphs, batch, expected",
    [
        # the CPU: the density rule, at any size (the committed CPU tables were made with it)
        ("auto", CPU, CPU, SMALL_SPARSE, "sparse"),
        ("auto", CPU, CPU, SMALL_DENSE, "dense"),
        ("auto", CPU, CPU, (64, 0.07), "dense"),  # at the threshold: dense
        ("auto", CPU, CPU, HUGE_SPARSE, "sparse"),
        ("auto", CPU, CPU, HUGE_DENSE, "dense"),
        ("sparse", CPU, CPU, SMALL_DENSE, "sparse"),
        ("dense", CPU, CPU, HUGE_SPARSE, "dense"),
        # a GPU with DGL's CUDA build: dense up to GPU_DENSE_MAX_NODES, the density rule beyond
        ("auto", GPU, GPU, SMALL_SPARSE, "dense"),
        ("auto", GPU, GPU, (GPU_DENSE_MAX_NODES, 0.001), "dense"),
        ("auto", GPU, GPU, (GPU_DENSE_MAX_NODES + 1, 0.001), "sparse"),
        ("auto", GPU, GPU, HUGE_DENSE, "dense"),
        ("sparse", GPU, GPU, SMALL_DENSE, "sparse"),
        ("dense", GPU, GPU, HUGE_SPARSE, "dense"),
        # a GPU with PyPI's CPU-only DGL: graphs on the CPU, only dense follows
        ("auto", GPU, CPU, HUGE_SPARSE, "dense"),
        ("dense", GPU, CPU, SMALL_SPARSE, "dense"),
    ],
)
def test_the_impl_of_a_batch(impl, model, graphs, batch, expected):
    n_max, density = batch
    assert choose_impl(impl, model, graphs, n_max, lambda: density, 0.07) == expected
    assert choose_impl(impl, *Placement(model, graphs).devices, lambda: n_max, lambda: density, 0.07) == expected


def test_sparse_where_graphs_cannot_follow_is_refused_in_one_line():
    """For a model with no message passing in stock torch (MiniLM); the encoder's runs there instead."""
    with pytest.raises(ValueError) as e:
        choose_impl("sparse", GPU, CPU, 64, lambda: 1.0, 0.07)
    assert str(e.value) == SPARSE_CUDA_ERROR


def old_choose_impl(m: GraphEncoder, g: dgl.DGLGraph) -> str:
    """GraphEncoder.choose_impl before engine/placement.py (7ef2f89), for graphs on the model's device."""
    if m.impl != "auto":
        return m.impl
    sizes = g.batch_num_nodes().double()
    edges = sum(m.construction.edge_count(int(n)) for n in sizes) if m.dynamic else g.num_edges()
    return "dense" if edges / (len(sizes) * sizes.max() ** 2) >= m.dense_min_density else "sparse"


@pytest.mark.parametrize("graph", ["complete", "tree", "window", "bpt", "knn"])
def test_the_encoder_on_the_cpu_decides_as_before(graph):
    construction = GraphConstruction(name=graph, k=3)
    rng = torch.Generator().manual_seed(0)
    seen = set()
    for trial in range(6):
        n = [int(x) for x in torch.randint(2, 40, (5,), generator=rng)]
        graphs = []
        for length in n:
            heads = [-1] + [int(torch.randint(0, i, (1,), generator=rng)) for i in range(1, length)]
            graphs.append(construction(list(range(3, 3 + length)), heads))
        g = dgl.batch(graphs)
        sizes = g.batch_num_nodes().double()
        edges = sum(construction.edge_count(int(n)) for n in sizes) if construction.dynamic else g.num_edges()
        exact = float(edges / (len(sizes) * sizes.max() ** 2))  # at the threshold itself: dense
        for impl, threshold in itertools.product(("auto", "sparse", "dense"), (0.0, 0.07, 0.2, 0.5, 1.1, exact)):
            m = graph_encoder(50, 3, hidden_dim=8, num_layers=1, construction=construction, impl=impl)
            m.dense_min_density = threshold
            assert m.choose_impl(g) == old_choose_impl(m, g), (graph, trial, impl, threshold)
            seen.add(m.choose_impl(g))
    assert seen == {"sparse", "dense"}


def test_the_memory_plan_reads_the_same_decision():
    model = model_config(compose_config(["model=transformer"]).model)  # impl auto, dense_min_density 0.07
    window = GraphConstruction(name="window", window=2)
    assert not runs_dense(model, window, 1000, Placement(CPU, CPU))  # the CPU: sparse by density
    assert runs_dense(model, window, 1000, Placement(GPU, GPU))  # a GPU: dense up to 4,000 nodes
    assert not runs_dense(model, window, GPU_DENSE_MAX_NODES + 1, (GPU, GPU))  # beyond: the density rule
    assert runs_dense(model, window, 100_000, (GPU, CPU))  # CPU-only DGL: only dense follows the model
    tree_walk = model_config(compose_config(["model=treelstm"]).model)
    assert not runs_dense(tree_walk, window, 1000, (GPU, GPU))  # a tree walk
